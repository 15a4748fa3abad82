"""Attention over a shared prefix that is stored once, not once per sampled row.

The probe decodes hundreds of rows whose contexts are crops of a few long prefixes (prompt and
chain of thought). Copying each prefix into every row's KV cache makes every decoding step read
(and every row selection copy) hundreds of identical prefixes: on a small model that memory
traffic, not the arithmetic, is the cost. Here a row's cache holds only its own tokens (forced
text and answer); its prefix is read from the one copy of its source, and the two parts of the
attention are merged exactly with their log-sum-exp (as in cascade / shared-prefix attention):

    out = (e^(m1-m) * A1 + e^(m2-m) * A2) / (e^(m1-m) * l1 + e^(m2-m) * l2),  m = max(m1, m2)

where part i has score maximum `m_i`, normaliser `l_i = sum e^(s - m_i)` and unnormalised
output `A_i = sum e^(s - m_i) v`.

It plugs into transformers through its attention interface: `shared_prefix_attention(model)`
switches a model to the registered function `ATTENTION_NAME` for a block of code, and a forward
call passes `probe_prefix=SharedPrefix(...)`; without that argument the function is plain SDPA.
The rows' own tokens are kept by calibrl, not by a transformers cache: the forward call also
passes `probe_cache=GrowableCache(...)` (with `use_cache=False`), and the function appends the
new keys and values to it before attending (see `growable_cache` for why).
Models that do not dispatch attention through the interface are not supported (`supported`).

Shapes: R = rows, Hq / Hk = query / kv heads (g = Hq / Hk), Q = new tokens per row,
L = prefix slots, S = a row's own cached slots, D = head dim.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from calibrl.probe.growable_cache import GrowableCache

ATTENTION_NAME = "calibrl_shared_prefix"
KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [1, Hk, L, D]


@dataclass(frozen=True)
class _Group:
    source: int
    rows: torch.Tensor | slice  # [r] the rows reading this source (a slice when consecutive)
    count: int  # r
    width: int  # prefix slots any of them sees
    hidden: torch.Tensor  # [r, width] slots past a row's cut


@dataclass(frozen=True)
class SharedPrefix:
    """Which prefix each row reads, and how much of it.

    Attributes:
        kvs: per source, `kv_cache.prefill` output (one copy of its keys and values).
        source: `[R]` the prefix of each row.
        cut: `[R]` how many of its first tokens the row sees.
    """

    kvs: Sequence[KV]
    source: torch.Tensor
    cut: torch.Tensor
    groups: list[_Group] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Rows grouped by source once, not in every layer of every step.
        groups = []
        for source in torch.unique(self.source).tolist():
            rows = (self.source == source).nonzero()[:, 0]
            width = int(self.cut[rows].max())
            if width > 0:
                slots = torch.arange(width, device=self.cut.device)
                hidden = slots[None, :] >= self.cut[rows][:, None]
                first, count = int(rows[0]), len(rows)
                # Rows are sorted by source, so a group is usually a run: a view, not a copy.
                consecutive = int(rows[-1]) - first == count - 1
                groups.append(_Group(source, slice(first, first + count) if consecutive
                                     else rows, count, width, hidden))
        object.__setattr__(self, "groups", groups)

    def select(self, index: torch.Tensor) -> SharedPrefix:
        """Rows `index` (kept, repeated or dropped), as `Cache.batch_select_indices` does."""
        return SharedPrefix(self.kvs, self.source[index], self.cut[index])


def _prefix_part(query: torch.Tensor, prefix: SharedPrefix, layer: int, scaling: float
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Score maximum `[R, Hk, gQ]`, normaliser `[R, Hk, gQ]`, unnormalised output
    `[R, Hk, gQ, D]` of the queries `[R, Hk, gQ, D]` against their rows' prefixes."""
    rows, heads, gq, dim = query.shape
    m = query.new_full((rows, heads, gq), -torch.inf)
    norm = query.new_zeros((rows, heads, gq))
    acc = query.new_zeros((rows, heads, gq, dim))
    for group in prefix.groups:
        idx, width, count = group.rows, group.width, group.count
        keys, values = prefix.kvs[group.source][layer]  # [1, Hk, L, D]
        k, v = keys[0, :, :width].float(), values[0, :, :width].float()  # [Hk, L, D]
        q = query[idx].permute(1, 0, 2, 3).reshape(heads, -1, dim)  # [Hk, r*gQ, D]
        # In place on fresh tensors: the same operations, fewer large allocations.
        scores = torch.bmm(q, k.transpose(1, 2)).view(heads, count, gq, width).mul_(scaling)
        scores.masked_fill_(group.hidden[None, :, None, :], -torch.inf)  # [Hk, r, gQ, L]
        m_s = scores.amax(-1)  # [Hk, r, gQ]; -inf for a row that sees no prefix
        p = scores.sub_(torch.where(torch.isinf(m_s), 0.0, m_s)[..., None]).exp_()
        out = torch.bmm(p.view(heads, -1, width), v).view(heads, count, gq, dim)
        m[idx] = m_s.permute(1, 0, 2)
        norm[idx] = p.sum(-1).permute(1, 0, 2)
        acc[idx] = out.permute(1, 0, 2, 3)
    return m, norm, acc


def _own_part(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, new: int,
              scaling: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The same three for the rows' own cached tokens `[R, Hk, S, D]`; the last `new` of them
    are the queries' own, seen causally."""
    rows, heads, gq, dim = query.shape
    slots = key.shape[2]
    scores = torch.matmul(query, key.float().transpose(2, 3)).mul_(scaling)  # [R, Hk, gQ, S]
    if new > 1:  # one new token (decoding) sees every slot: nothing to hide
        g = gq // new
        q_pos = (slots - new + torch.arange(new, device=query.device)).repeat(g)  # [gQ]
        hidden = torch.arange(slots, device=query.device)[None, :] > q_pos[:, None]  # [gQ, S]
        scores.masked_fill_(hidden, -torch.inf)
    m = scores.amax(-1)  # finite: every query sees itself
    p = scores.sub_(m[..., None]).exp_()
    return m, p.sum(-1), torch.matmul(p, value.float())


def attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
              value: torch.Tensor, attention_mask: torch.Tensor | None, scaling: float | None = None,
              dropout: float = 0.0, probe_prefix: SharedPrefix | None = None,
              probe_cache: GrowableCache | None = None, **kwargs: Any
              ) -> tuple[torch.Tensor, None]:
    """The attention function (transformers' interface): query `[R, Hq, Q, D]`, the rows' own
    keys and values `[R, Hk, S, D]`; returns `[R, Q, Hq, D]` as every interface function does.

    With `probe_cache`, `key` / `value` are only the new tokens' `[R, Hk, Q, D]`: they are
    appended to the cache's layer `module.layer_idx` and the rows attend over all of it.
    """
    if probe_prefix is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling,
                                      dropout=dropout, **kwargs)
    if probe_cache is not None:
        key, value = probe_cache.update(key, value, module.layer_idx)
    rows, q_heads, new, dim = query.shape
    heads = key.shape[1]
    scale = scaling if scaling is not None else dim ** -0.5
    # Query heads of one kv head side by side: [R, Hk, g*Q, D] (the layout GQA needs).
    q = query.float().reshape(rows, heads, (q_heads // heads) * new, dim)
    m1, l1, a1 = _prefix_part(q, probe_prefix, module.layer_idx, scale)
    m2, l2, a2 = _own_part(q, key, value, new, scale)
    m = torch.maximum(m1, m2)
    w1, w2 = torch.exp(m1 - m), torch.exp(m2 - m)  # m2 is finite, so no inf - inf
    out = (w1[..., None] * a1 + w2[..., None] * a2) / (w1 * l1 + w2 * l2)[..., None]
    out = out.view(rows, q_heads, new, dim).transpose(1, 2)  # [R, Q, Hq, D]
    return out.to(query.dtype).contiguous(), None


AttentionInterface.register(ATTENTION_NAME, attention)


def supported(model: Any) -> bool:
    """Whether the model dispatches attention through transformers' interface."""
    check = getattr(model, "_can_set_attn_implementation", None)
    return bool(check and check())


@contextmanager
def shared_prefix_attention(model: Any) -> Iterator[None]:
    """Run `model` with `attention` for this block; its own implementation is restored after."""
    before = model.config._attn_implementation
    model.set_attn_implementation(ATTENTION_NAME)
    try:
        yield
    finally:
        model.set_attn_implementation(before)
