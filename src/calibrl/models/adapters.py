"""What training changes about a loaded policy: gradient checkpointing and a LoRA adapter.

With `lora.r > 0` the policy is a peft `PeftModel`: only the adapter trains, a checkpoint's
`model/` holds the adapter (`adapter_model.safetensors`), and the final model is saved merged,
so evaluation, the probe and any Hugging Face loader read it as a plain causal LM. peft is an
optional extra (`calibrl[peft]`); asking for LoRA without it is one `UserError` line.
"""

from __future__ import annotations

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


def prepare_policy(model: Any, *, gradient_checkpointing: bool = False,
                   lora: LoraSection | None = None) -> Any:
    """`model` ready to train: activations recomputed in the backward pass if asked, and wrapped
    in a LoRA adapter when `lora.r > 0` (the returned model is then a `PeftModel`)."""
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
        return model
    peft = require_peft()
    config = peft.LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                             target_modules=lora.target_modules, task_type="CAUSAL_LM")
    try:
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
