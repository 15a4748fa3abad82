"""Reading the frozen lower blocks once: with `train_layers` only the top blocks of a decoder
train, so the lower blocks' output for a fixed row is the same at every step. A stage that
passes over the same rows many times (the confidence warm-up) can compute those states once and
run only the top blocks per step.

The split uses transformers' own forward: the decoder's block list is narrowed for the call
(`blocks_only`), the states entering block `frozen` are read at the final norm's input when
only the blocks below run (`lower_states`), and fed back as `inputs_embeds` when only the blocks
from `frozen` up run (`upper_logits`). That equals the full forward for decoders whose forward
adds nothing to `inputs_embeds` (Llama, Qwen2, Mistral, SmolLM2); `matches_full_forward` checks
it on a batch, so a caller falls back to the full forward where it does not (e.g. a decoder that
scales its embeddings inside forward).

Shapes: B rows, T tokens, H hidden units, V vocabulary.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from calibrl.errors import UserError
from calibrl.models.adapters import decoder_blocks


@contextlib.contextmanager
def blocks_only(model: Any, start: int, stop: int | None = None) -> Iterator[None]:
    """Within the block, `model`'s decoder runs only its blocks[start:stop] (`model` may be
    wrapped for distribution: the wrapper's `.module` is narrowed)."""
    decoder = getattr(model, "module", model).get_decoder()
    blocks = decoder.layers
    decoder.layers = torch.nn.ModuleList(list(blocks)[start:stop])
    try:
        yield
    finally:
        decoder.layers = blocks


def splittable(model: Any) -> bool:
    """Whether `model` has the parts the split reads: blocks in `.layers` and a final norm."""
    try:
        _, norm = decoder_blocks(model)
    except UserError:  # a decoder without `.layers` cannot be split
        return False
    return norm is not None


@torch.no_grad()
def lower_states(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 frozen: int) -> torch.Tensor:
    """[B, T, H] the hidden states entering block `frozen` (the output of blocks 0..frozen-1)
    of input_ids / attention_mask [B, T]."""
    _, norm = decoder_blocks(model)
    seen: dict[str, torch.Tensor] = {}
    hook = norm.register_forward_pre_hook(lambda _m, args: seen.setdefault("x", args[0]))
    try:
        with blocks_only(model, 0, frozen):
            model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=1,
                  use_cache=False)
    finally:
        hook.remove()
    return seen["x"].detach()


def upper_logits(model: Any, states: torch.Tensor, attention_mask: torch.Tensor, frozen: int,
                 start: int) -> torch.Tensor:
    """[B, T - start, V] the logits at positions start..T-1 when `states` ([B, T, H], from
    `lower_states`) enter block `frozen` and the blocks above it run (with gradients)."""
    keep = states.shape[1] - start
    if not 0 < keep <= states.shape[1]:
        raise ValueError(f"start {start} outside 0..{states.shape[1] - 1}")
    with blocks_only(model, frozen):
        return model(inputs_embeds=states, attention_mask=attention_mask, logits_to_keep=keep,
                     use_cache=False).logits


def padded(states: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    """[B, width, H] the rows' states ([T_b, H] each, T_b <= width) right-padded with zeros,
    as `collate` pads the token ids (the padding is masked out)."""
    out = states[0].new_zeros((len(states), width, states[0].shape[-1]))
    for b, s in enumerate(states):
        out[b, :len(s)] = s
    return out


@torch.no_grad()
def matches_full_forward(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                         frozen: int, tolerance: float = 1e-3) -> bool:
    """Whether the split forward gives the full forward's logits on this batch, within
    `tolerance` relative to the largest logit, at every unpadded position."""
    full = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
    split = upper_logits(model, lower_states(model, input_ids, attention_mask, frozen),
                         attention_mask, frozen, 0)
    kept = attention_mask.bool()
    gap = (full[kept].float() - split[kept].float()).abs().max()
    return bool(gap <= tolerance * (1.0 + full[kept].float().abs().max()))
