"""What training changes about a loaded policy: gradient checkpointing, a LoRA adapter, and
which decoder blocks train at all (`train_layers`).

With `lora.r > 0` the policy is a peft `PeftModel`: only the adapter trains, a checkpoint's
`model/` holds the adapter (`adapter_model.safetensors`), and the final model is saved merged,
so evaluation, the probe and any Hugging Face loader read it as a plain causal LM. peft is an
optional extra (`calibrl[peft]`); asking for LoRA without it is one `UserError` line.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from calibrl.errors import UserError
from calibrl.settings.sections import LoraSection

FULL_WEIGHTS = "model.safetensors"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def require_peft() -> Any:
    """The peft module; one `UserError` line when it is not installed."""
    try:
        import peft
    except ImportError:
        raise UserError("model.lora.r > 0 needs peft: pip install 'calibrl[peft]'") from None
    return peft


def is_lora(model: Any) -> bool:
    """Whether `model` is a peft model (without importing peft when it is not)."""
    return any(cls.__module__.startswith("peft.") for cls in type(model).__mro__)


def decoder_blocks(model: Any) -> tuple[list[Any], Any]:
    """The decoder's blocks, bottom first, and its final norm (None when it has none): the
    transformers decoders calibrl trains (Llama, Qwen2, Mistral, ...) keep them as
    `get_decoder().layers` and `.norm`."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    layers = getattr(decoder, "layers", None)
    if layers is None:
        raise UserError(f"train_layers needs a decoder whose blocks are `.layers`; "
                        f"{type(model).__name__} has none")
    return list(layers), getattr(decoder, "norm", None)


def top_layer_indices(num_layers: int, train_layers: int) -> list[int]:
    """The indices of the top `train_layers` of `num_layers` blocks; `UserError` when it is not
    in 1..num_layers."""
    if not 0 < train_layers <= num_layers:
        raise UserError(f"train_layers must be in 1..{num_layers} (the model's blocks), got "
                        f"{train_layers}")
    return list(range(num_layers - train_layers, num_layers))


def freeze_below_top_layers(model: Any, train_layers: int) -> None:
    """Only the top `train_layers` blocks and the final norm keep `requires_grad`: the
    embeddings (and a tied output head), the head and the lower blocks are frozen. Nothing
    below the lowest trained block then needs a gradient, so the backward pass stops there:
    on a 30-block model, training 6 costs about half of training every weight."""
    blocks, norm = decoder_blocks(model)
    top = top_layer_indices(len(blocks), train_layers)
    model.requires_grad_(False)
    for i in top:
        blocks[i].requires_grad_(True)
    if norm is not None:
        norm.requires_grad_(True)


def _block_linear_names(block: Any, targets: str | list[str]) -> list[str]:
    """peft picks layers only for a list of module names: "all-linear" becomes the names of a
    block's linear layers; any other single string (peft reads it as a pattern) cannot be."""
    if not isinstance(targets, str):
        return targets
    if targets != "all-linear":
        raise UserError(f"model.lora.target_modules {targets!r} with train_layers: give a list "
                        "of module names, e.g. [q_proj, v_proj]")
    import torch

    return sorted({name.rsplit(".", 1)[-1] for name, module in block.named_modules()
                   if isinstance(module, torch.nn.Linear)})


def prepare_policy(model: Any, *, gradient_checkpointing: bool = False,
                   lora: LoraSection | None = None, train_layers: int | None = None) -> Any:
    """`model` ready to train: activations recomputed in the backward pass if asked, wrapped
    in a LoRA adapter when `lora.r > 0` (the returned model is then a `PeftModel`), and with
    `train_layers` only the top blocks trained (their adapters, with LoRA)."""
    if gradient_checkpointing:
        # Non-reentrant checkpointing needs no input that requires grad, so it also works when
        # LoRA freezes the embeddings.
        # (The decode loop's KV cache is unaffected: checkpointing acts in training mode only.)
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # its name from transformers 5.x
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if lora is None or lora.r == 0:
        if train_layers is not None:
            freeze_below_top_layers(model, train_layers)
        return model
    peft = require_peft()
    targets, layers = lora.target_modules, None
    if train_layers is not None:
        blocks, _ = decoder_blocks(model)
        layers = top_layer_indices(len(blocks), train_layers)
        targets = _block_linear_names(blocks[-1], targets)
    config = peft.LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                             target_modules=targets, task_type="CAUSAL_LM",
                             layers_to_transform=layers)
    try:
        with warnings.catch_warnings():
            # peft asks transformers' is_gradient_checkpointing, which warns of its own
            # renaming: not the user's to act on.
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*",
                                    category=FutureWarning)
            return peft.get_peft_model(model, config)
    except ValueError as err:  # e.g. a target module the model does not have
        raise UserError(f"model.lora: {str(err).splitlines()[0]}") from None


def trainable_parameters(model: Any) -> list[Any]:
    """The parameters the optimiser updates (all of them without an adapter)."""
    return [p for p in model.parameters() if p.requires_grad]


def load_trained_weights(model: Any, model_dir: Path) -> None:
    """Load a checkpoint's `model/` into `model`: the adapter of a LoRA policy, else every
    weight."""
    from safetensors.torch import load_file

    if is_lora(model):
        path = model_dir / ADAPTER_WEIGHTS
        if not path.is_file():
            raise UserError(f"{model_dir} holds no LoRA adapter; resume with the model.lora "
                            "settings the run was started with")
        result = require_peft().set_peft_model_state_dict(model, load_file(str(path)))
        if getattr(result, "unexpected_keys", None):
            raise UserError(f"{path} does not fit this adapter (model.lora differs from the "
                            "run's)")
        return
    path = model_dir / FULL_WEIGHTS
    if not path.is_file():
        raise UserError(f"{model_dir} holds no {FULL_WEIGHTS} (a LoRA run's checkpoint? resume "
                        "with the run's model.lora settings)")
    model.load_state_dict(load_file(str(path)), strict=False)


def final_model(model: Any) -> Any:
    """The model to save and publish at the end: a LoRA policy merged into its base weights (in
    place: the adapter is gone afterwards), any other model as it is."""
    return model.merge_and_unload() if is_lora(model) else model
