"""The probe rows' own keys and values, appended in place; written by the attention function.

A probe row's cache holds only its own tokens (forced text and answer; its prefix is read from
the one shared copy, `shared_prefix`). With hundreds of rows and answers of ~100 tokens,
transformers' `DynamicCache` concatenates at every step, so every step copies every row's
cache; measured on the tiny model (1 CPU thread, 4 chains x 10 cuts x 50 samples, 100 answer
tokens) that made sampling ~1.5x slower. Here each layer keeps a buffer with spare room and a
step writes only what it adds. (With 30 answer tokens the two cost the same.)

Why not a transformers cache class: the public ones do not fit. `DynamicCache` copies as above;
`StaticCache` writes in place but returns all of its preallocated slots, unfilled ones included,
to the attention function and cannot select rows (finished rows leave the batch, and each
context is repeated for its samples). Subclassing their layer classes ties calibrl to internals
that change between releases (an earlier version of this module did). So this is not a
transformers `Cache` at all: the model runs with `use_cache=False`, and the probe's attention
function (`shared_prefix.attention`, registered through the public `AttentionInterface`) is
handed this object and calls `update` itself, then attends over the returned views.

The method names follow `DynamicCache` (`update`, `batch_select_indices`, `get_seq_length`,
`layers[i].keys / .values`), so the two can be compared directly (tests/probe).

Shapes: R = rows, H = kv heads, L = filled slots, C = capacity, D = head dim.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class GrowableLayer:
    """One layer: it owns the buffers `[R, H, C, D]`, of which the first `length` slots are
    filled; `keys` / `values` are views of those."""

    def __init__(self, keys_buffer: torch.Tensor, values_buffer: torch.Tensor, length: int
                 ) -> None:
        self._keys, self._values, self._length = keys_buffer, values_buffer, length
        self.storage = (keys_buffer, values_buffer)  # the allocated buffers, all their rows
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
        self.storage = (self._keys, self._values)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append `[R, H, S, D]` keys and values; returns the filled views `[R, H, L + S, D]`."""
        new = key_states.shape[2]
        if self._length + new > self._keys.shape[2]:
            self._grow(self._length + new)
        self._keys[:, :, self._length:self._length + new] = key_states
        self._values[:, :, self._length:self._length + new] = value_states
        self._length += new
        self._refresh()
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor, spare: GrowableLayer | None = None
                             ) -> None:
        """Keep (or repeat) rows `indices`, copying only the filled slots; fewer rows reuse the
        buffers (no new allocation while finished rows leave the batch). More rows take the
        buffers of `spare` (a layer no longer in use, e.g. the previous batch's) when they are
        large enough: a fresh buffer of hundreds of rows costs more in page faults than in the
        copy. Slots past the filled ones are never read, so what a reused buffer holds there
        does not matter."""
        rows = len(indices)
        storage = list(self.storage)
        for i, name in enumerate(("_keys", "_values")):
            old = getattr(self, name)
            kept = old[indices, :, :self._length]  # [R', H, L, D], copied before any write
            if not _fits(storage[i], old, rows):
                storage[i] = (spare.storage[i] if spare is not None
                              and _fits(spare.storage[i], old, rows)
                              else old.new_empty((rows, *old.shape[1:])))
            new = storage[i][:rows]
            new[:, :, :self._length] = kept
            setattr(self, name, new)
        self.storage = (storage[0], storage[1])
        self._refresh()

    def get_seq_length(self) -> int:
        return self._length


class GrowableCache:
    """One `GrowableLayer` per model layer, all filled to the same length between forwards."""

    def __init__(self, layers: Sequence[GrowableLayer]) -> None:
        self.layers = list(layers)

    @classmethod
    def zeros(cls, layers: int, rows: int, heads: int, capacity: int, head_dim: int,
              length: int, like: torch.Tensor) -> GrowableCache:
        """Zero-filled buffers, the first `length` slots counted as filled (the caller writes
        them): slots a row does not use stay zero, which masked attention needs (never NaN)."""
        shape = (rows, heads, capacity, head_dim)
        return cls([GrowableLayer(like.new_zeros(shape), like.new_zeros(shape), length)
                    for _ in range(layers)])

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append to layer `layer_idx` (the signature of `Cache.update`)."""
        return self.layers[layer_idx].update(key_states, value_states)

    def batch_select_indices(self, indices: torch.Tensor, spare: GrowableCache | None = None
                             ) -> None:
        """Keep (or repeat) rows `indices` in every layer; see `GrowableLayer` for `spare`."""
        for i, layer in enumerate(self.layers):
            layer.batch_select_indices(indices, None if spare is None else spare.layers[i])

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.layers[layer_idx].get_seq_length()


def _fits(buffer: torch.Tensor, like: torch.Tensor, rows: int) -> bool:
    """Whether `buffer` can hold `rows` rows shaped like `like`'s."""
    return (buffer.shape[0] >= rows and buffer.shape[1:] == like.shape[1:]
            and buffer.dtype == like.dtype and buffer.device == like.device)
