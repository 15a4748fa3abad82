"""A KV cache that appends in place, for decoding many rows of long shared contexts.

transformers' `DynamicLayer.update` concatenates, so every decoding step copies the whole cache:
with hundreds of rows each holding a prompt and a chain of thought, that copy, not the model,
is most of the time on a small model. `GrowableCache` keeps each layer in a buffer with spare
room and writes a step's keys and values into it: a step costs what it adds. Rows are still
selected (expanded for samples, dropped when finished) with `batch_select_indices`, which copies.

It is a drop-in for `DynamicCache` in the `calibrl.rollout.kv_cache` functions: they only call
`update` (through the model), `batch_select_indices` and the layers' `keys` / `values`, which here
are views of the filled part of the buffers, so in-place writes to them reach the buffers.

Shapes: R = rows, H = kv heads, L = filled slots, C = capacity, D = head dim.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers.cache_utils import Cache, DynamicLayer


class GrowableLayer(DynamicLayer):
    """One layer: it owns the buffers `[R, H, C, D]`, of which the first `length` slots are
    filled; `keys` / `values` are views of those."""

    def __init__(self, keys_buffer: torch.Tensor, values_buffer: torch.Tensor, length: int
                 ) -> None:
        super().__init__()
        self.dtype, self.device = keys_buffer.dtype, keys_buffer.device
        self.is_initialized = True
        self._keys, self._values, self._length = keys_buffer, values_buffer, length
        self._refresh()

    def _refresh(self) -> None:
        self.keys = self._keys[:, :, :self._length]
        self.values = self._values[:, :, :self._length]

    def _grow(self, needed: int) -> None:
        capacity = max(needed, 2 * self._keys.shape[2])
        for name in ("_keys", "_values"):
            old = getattr(self, name)
            new = old.new_empty((*old.shape[:2], capacity, old.shape[3]))
            new[:, :, :self._length] = old[:, :, :self._length]
            setattr(self, name, new)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        new = key_states.shape[2]
        if self._length + new > self._keys.shape[2]:
            self._grow(self._length + new)
        self._keys[:, :, self._length:self._length + new] = key_states
        self._values[:, :, self._length:self._length + new] = value_states
        self._length += new
        self._refresh()
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep (or repeat) rows `indices`, copying only the filled slots; fewer rows reuse the
        buffers (no new allocation while finished rows leave the batch)."""
        for name in ("_keys", "_values"):
            old = getattr(self, name)
            kept = old[indices, :, :self._length]  # [R', H, L, D]
            if len(indices) <= old.shape[0]:
                new = old[:len(indices)]
            else:
                new = old.new_empty((len(indices), *old.shape[1:]))
            new[:, :, :self._length] = kept
            setattr(self, name, new)
        self._refresh()

    def get_seq_length(self) -> int:
        return self._length


class GrowableCache(Cache):
    """A cache of `GrowableLayer`s, all filled to the same length."""

    def __init__(self, layers: Sequence[GrowableLayer]) -> None:
        super().__init__(layers=list(layers))

    @classmethod
    def zeros(cls, layers: int, rows: int, heads: int, capacity: int, head_dim: int,
              length: int, like: torch.Tensor) -> GrowableCache:
        """Zero-filled buffers, the first `length` slots counted as filled (the caller writes
        them): slots a row does not use stay zero, which masked attention needs (never NaN)."""
        shape = (rows, heads, capacity, head_dim)
        return cls([GrowableLayer(like.new_zeros(shape), like.new_zeros(shape), length)
                    for _ in range(layers)])
