"""KV-cache tools for sampling many continuations of shared contexts with a transformers model.

The pattern (used by `HFEngine` and reusable by the faithfulness probe):

1. `prefill(model, prefix)` encodes one long sequence once and keeps its keys and values.
2. `rows_from_prefix(prefix_kv, cuts)` builds a batch whose row `i` sees only `prefix[:cuts[i]]`:
   every row holds the first `max(cuts)` cached positions and the attention mask hides the ones
   past its own cut. No prefix token is encoded again (cropping without re-running the prefill).
3. `extend(model, cache, mask, next_pos, blocks)` appends a ragged block of new tokens to every
   row in one forward pass (suffixes such as `</think>\\n<answer>`, or whole prompts when there is
   no prefix) and returns each row's next-token logits.
4. `select_rows(cache, mask, index)` repeats rows for `n` samples each (the expand step) and
   drops finished rows during decoding.

Batches are ragged, so a row's real tokens need not be contiguous in the cache: padding may sit
between its prefix and its suffix. The 2-D attention mask hides those slots and `position_ids`
count real tokens only, so each row computes exactly what it would compute alone.

Only full-attention decoder models (Qwen2, Llama, ...) are supported: sliding-window layers
would need their own cache layout.

Shapes: R = rows, L = cached slots, S = new slots, H = kv heads, D = head dim.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any

import torch
import transformers
from packaging.version import Version
from transformers import DynamicCache

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [R, H, L, D]


# transformers 5.24 renamed the forward argument `past_key_values` to `cache` (the old name warns,
# and goes in 5.40); a wrapper whose forward takes **kwargs (peft, DDP) hands it to a model of
# the installed version.
_RENAMED_IN = Version("5.24.0")


@functools.cache
def _cache_keyword(model_class: type) -> str:
    params = inspect.signature(model_class.forward).parameters
    for name in ("cache", "past_key_values"):
        if name in params:
            return name
    return "cache" if Version(transformers.__version__) >= _RENAMED_IN else "past_key_values"


def with_cache(model: Any, cache: DynamicCache) -> dict[str, DynamicCache]:
    """The keyword argument that hands `cache` to `model`'s forward, by the name its forward
    reads: `model(**with_cache(model, cache), ...)`."""
    return {_cache_keyword(type(model)): cache}


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def cache_to_kv(cache: DynamicCache) -> KV:
    """The cache's per-layer tensors (shared, not copied)."""
    return [(layer.keys, layer.values) for layer in cache.layers]


def kv_to_cache(kv: KV) -> DynamicCache:
    """A fresh `DynamicCache` holding `kv` (DynamicLayer.update concatenates, so this copies)."""
    cache = DynamicCache()
    for i, (k, v) in enumerate(kv):
        cache.update(k, v, i)
    return cache


def prefill(model: torch.nn.Module, token_ids: Sequence[int]) -> KV:
    """Encode one sequence and return its keys and values, `[1, H, len(token_ids), D]` per layer."""
    ids = torch.tensor([list(token_ids)], dtype=torch.long, device=model_device(model))
    cache = DynamicCache()
    model(input_ids=ids, **with_cache(model, cache), use_cache=True, logits_to_keep=1)
    return cache_to_kv(cache)


def rows_from_prefix(
    prefix_kv: KV | None, cuts: Sequence[int], device: torch.device
) -> tuple[DynamicCache, torch.Tensor]:
    """A batch cache whose row `i` sees the first `cuts[i]` prefix tokens.

    Args:
        prefix_kv: from `prefill` (batch 1), or None when there is no prefix (all cuts 0).
    Returns:
        cache with `L = max(cuts)` slots per row, and the mask `[R, L]` (1 = visible).
    """
    width = max(cuts, default=0)
    cuts_t = torch.tensor(list(cuts), dtype=torch.long, device=device)
    mask = (torch.arange(width, device=device)[None, :] < cuts_t[:, None]).long()  # [R, L]
    if width == 0 or prefix_kv is None:
        return DynamicCache(), mask
    rows = len(cuts)
    kv = [(k[:, :, :width].expand(rows, -1, -1, -1), v[:, :, :width].expand(rows, -1, -1, -1))
          for k, v in prefix_kv]
    return kv_to_cache(kv), mask


def select_rows(
    cache: DynamicCache, mask: torch.Tensor, index: torch.Tensor
) -> tuple[DynamicCache, torch.Tensor]:
    """Keep (or repeat) rows `index` `[R']` of the cache and the mask `[R, L]`, in place for the
    cache. Repeating is how one encoded context becomes `n` sample rows."""
    cache.batch_select_indices(index)
    return cache, mask[index]


def extend(
    model: torch.nn.Module,
    cache: DynamicCache,
    mask: torch.Tensor,
    next_pos: torch.Tensor,
    blocks: Sequence[Sequence[int]],
    pad_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Append `blocks[i]` to row `i` in one forward pass; return next-token logits and the mask.

    Blocks are left-padded to the longest so every row's last slot is a real token.

    Args:
        mask: `[R, L]` visibility of the cached slots.
        next_pos: `[R]` position id of each row's first new token (its count of real tokens).
        blocks: R non-empty token lists.
    Returns:
        logits `[R, V]` after each row's last token, and the mask `[R, L + S]`. The cache grows
        by S slots in place.
    """
    device = mask.device
    width = max(len(b) for b in blocks)
    ids = torch.full((len(blocks), width), pad_id, dtype=torch.long)  # [R, S]
    new_mask = torch.zeros((len(blocks), width), dtype=torch.long)
    offsets = torch.zeros((len(blocks), width), dtype=torch.long)
    for r, block in enumerate(blocks):
        ids[r, width - len(block):] = torch.tensor(list(block), dtype=torch.long)
        new_mask[r, width - len(block):] = 1
        offsets[r, width - len(block):] = torch.arange(len(block))
    full_mask = torch.cat([mask, new_mask.to(device)], dim=1)  # [R, L + S]
    positions = next_pos[:, None] + offsets.to(device)  # padding slots get harmless positions
    out = model(input_ids=ids.to(device), attention_mask=full_mask, position_ids=positions,
                **with_cache(model, cache), use_cache=True, logits_to_keep=1)
    zero_hidden_slots(cache, full_mask)
    return out.logits[:, -1], full_mask


def decode_step(
    model: torch.nn.Module,
    cache: DynamicCache,
    mask: torch.Tensor,
    pos: torch.Tensor,
    tokens: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Feed one token per row. `tokens`, `pos`: `[R]`; returns logits `[R, V]`, mask `[R, L+1]`."""
    mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
    out = model(input_ids=tokens[:, None], attention_mask=mask, position_ids=pos[:, None],
                **with_cache(model, cache), use_cache=True, logits_to_keep=1)
    return out.logits[:, -1], mask


def zero_hidden_slots(cache: DynamicCache, mask: torch.Tensor) -> None:
    """Zero the keys and values of padding slots (`mask [R, L]` == 0).

    A left-padding query sees no key at all; some attention kernels return NaN for such a row,
    and a NaN value times a zero attention weight is still NaN. Zeroed slots are inert. The
    layers get new tensors rather than being written in place, so a cache built with gradients
    (`calibrl.training.policy`) keeps them.
    """
    hidden = (mask == 0)[:, None, :, None]  # [R, 1, L, 1]
    if not bool(hidden.any()):
        return
    for layer in cache.layers:
        layer.keys = layer.keys.masked_fill(hidden, 0)
        layer.values = layer.values.masked_fill(hidden, 0)
