"""Shared-prefix attention and the in-place cache against plain SDPA and `DynamicCache`."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from calibrl.probe.growable_cache import GrowableCache, GrowableLayer
from calibrl.probe.shared_prefix import (
    ATTENTION_NAME,
    SharedPrefix,
    attention,
    shared_prefix_attention,
    supported,
)


class Module(torch.nn.Module):
    def __init__(self, layer_idx: int = 0, groups: int = 1):
        super().__init__()
        self.layer_idx, self.num_key_value_groups, self.is_causal = layer_idx, groups, True


def reference(query, own_k, own_v, prefixes, sources, cuts, scaling):
    """Row by row: SDPA over the row's visible prefix followed by its own keys, causal."""
    rows, q_heads, new, dim = query.shape
    groups = q_heads // own_k.shape[1]
    out = []
    for r in range(rows):
        pk, pv = prefixes[sources[r]]
        k = torch.cat([pk[0, :, :cuts[r]], own_k[r]], dim=1).repeat_interleave(groups, 0)
        v = torch.cat([pv[0, :, :cuts[r]], own_v[r]], dim=1).repeat_interleave(groups, 0)
        total = k.shape[1]
        q_pos = total - new + torch.arange(new)
        mask = torch.arange(total)[None, :] <= q_pos[:, None]  # [Q, total]
        out.append(torch.nn.functional.scaled_dot_product_attention(
            query[r], k, v, attn_mask=mask, scale=scaling).transpose(0, 1))  # [Q, Hq, D]
    return torch.stack(out)


@pytest.mark.parametrize("new, q_heads, kv_heads", [(1, 4, 2), (3, 4, 2), (2, 2, 2), (1, 6, 1)])
def test_attention_equals_sdpa_over_the_concatenated_context(new, q_heads, kv_heads):
    torch.manual_seed(new * 10 + q_heads)
    dim, own = 8, 5
    prefixes = [(torch.randn(1, kv_heads, 9, dim), torch.randn(1, kv_heads, 9, dim)),
                (torch.randn(1, kv_heads, 4, dim), torch.randn(1, kv_heads, 4, dim))]
    sources, cuts = [0, 1, 0, 0, 1], [9, 4, 0, 3, 2]
    query = torch.randn(len(cuts), q_heads, new, dim)
    own_k, own_v = torch.randn(len(cuts), kv_heads, own, dim), torch.randn(len(cuts), kv_heads,
                                                                           own, dim)
    prefix = SharedPrefix([[p] for p in prefixes], torch.tensor(sources), torch.tensor(cuts))
    out, _ = attention(Module(0, q_heads // kv_heads), query, own_k, own_v, None, scaling=0.3,
                       probe_prefix=prefix)
    expected = reference(query, own_k, own_v, prefixes, sources, cuts, 0.3)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert out.shape == (len(cuts), new, q_heads, dim) and torch.isfinite(out).all()


def test_select_regroups_rows():
    kvs = [[(torch.zeros(1, 1, 4, 2), torch.zeros(1, 1, 4, 2))]] * 2
    prefix = SharedPrefix(kvs, torch.tensor([0, 1, 1]), torch.tensor([2, 0, 3]))

    def rows(group):  # a run of consecutive rows is kept as a slice
        return torch.arange(3)[group.rows].tolist()

    assert [(g.source, rows(g), g.width) for g in prefix.groups] == [(0, [0], 2), (1, [1, 2], 3)]
    assert all(isinstance(g.rows, slice) for g in prefix.groups)
    apart = SharedPrefix(kvs, torch.tensor([0, 1, 0]), torch.tensor([2, 1, 3]))
    assert [(g.source, rows(g), g.width) for g in apart.groups] == [(0, [0, 2], 3), (1, [1], 1)]
    assert isinstance(apart.groups[0].rows, torch.Tensor)
    picked = prefix.select(torch.tensor([2, 2, 0]))
    assert picked.cut.tolist() == [3, 3, 2] and picked.source.tolist() == [1, 1, 0]
    assert prefix.select(torch.tensor([1])).groups == []  # a row that sees no prefix


def test_without_a_prefix_the_function_is_plain_sdpa():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 2, 3, 4), torch.randn(2, 2, 3, 4), torch.randn(2, 2, 3, 4)
    out, _ = attention(Module(), q, k, v, None, scaling=0.5)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                scale=0.5).transpose(1, 2)
    torch.testing.assert_close(out, expected)


def test_the_context_manager_restores_the_implementation(model):
    before = model.config._attn_implementation
    assert supported(model)
    with shared_prefix_attention(model):
        assert model.config._attn_implementation == ATTENTION_NAME
    assert model.config._attn_implementation == before


def test_growable_cache_behaves_like_dynamic_cache():
    torch.manual_seed(0)
    start = torch.randn(3, 2, 4, 5)
    growable = GrowableCache([GrowableLayer(*_buffers(start, capacity=6), length=4)])
    dynamic = DynamicCache()
    dynamic.update(start, start * 2, 0)
    steps = [torch.randn(3, 2, 1, 5), torch.randn(3, 2, 2, 5)]
    for i, step in enumerate(steps + [torch.randn(2, 2, 3, 5)]):  # the last one grows it
        if i == 2:
            for cache in (growable, dynamic):
                cache.batch_select_indices(torch.tensor([2, 0]))
        for cache in (growable, dynamic):
            keys, values = cache.update(step, step * 2, 0)
        torch.testing.assert_close(keys, dynamic.layers[0].keys)
        torch.testing.assert_close(growable.layers[0].values, dynamic.layers[0].values)
        assert growable.get_seq_length() == dynamic.get_seq_length()
    growable.batch_select_indices(torch.tensor([0, 0, 1, 1]))  # more rows: a new buffer
    dynamic.batch_select_indices(torch.tensor([0, 0, 1, 1]))
    torch.testing.assert_close(growable.layers[0].keys, dynamic.layers[0].keys)


def test_more_rows_take_a_spare_buffer_when_it_is_large_enough():
    torch.manual_seed(1)
    start = torch.randn(2, 2, 3, 5)
    spare = GrowableCache([GrowableLayer(*_buffers(torch.randn(6, 2, 3, 5), capacity=6),
                                         length=3)])
    small = GrowableCache([GrowableLayer(*_buffers(torch.randn(6, 2, 3, 5), capacity=5),
                                         length=3)])  # another capacity: does not fit
    for other, reused in ((spare, True), (small, False), (None, False)):
        cache = GrowableCache([GrowableLayer(*_buffers(start, capacity=6), length=3)])
        cache.batch_select_indices(torch.tensor([1, 1, 0, 0, 1]), spare=other)
        layer = cache.layers[0]
        assert (layer.storage[0] is spare.layers[0].storage[0]) == reused
        assert (layer.storage[1] is spare.layers[0].storage[1]) == reused
        assert torch.equal(layer.keys, start[[1, 1, 0, 0, 1]])
        assert torch.equal(layer.values, 2 * start[[1, 1, 0, 0, 1]])
        keys, _ = cache.update(torch.ones(5, 2, 1, 5), torch.ones(5, 2, 1, 5), 0)
        assert torch.equal(keys[:, :, :3], start[[1, 1, 0, 0, 1]]) and bool((keys[:, :, 3] == 1).all())


def _buffers(start, capacity):
    k = start.new_zeros((*start.shape[:2], capacity, start.shape[3]))
    v = k.clone()
    k[:, :, :start.shape[2]], v[:, :, :start.shape[2]] = start, start * 2
    return k, v
