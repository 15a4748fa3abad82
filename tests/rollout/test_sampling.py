"""Sampling primitives against slow obvious loops."""

from __future__ import annotations

import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrl.rollout.sampling import (
    derive_seed,
    filter_top_k_top_p,
    mix32,
    mix32_int,
    nucleus_drop,
    sample_tokens,
    sorted_nucleus_drop,
    step_seed,
    uniforms,
)


def test_mix32_tensor_matches_python_ints():
    rng = random.Random(0)
    xs = [0, 1, 2**31, 2**32 - 1] + [rng.randrange(2**32) for _ in range(1000)]
    assert mix32(torch.tensor(xs)).tolist() == [mix32_int(x) for x in xs]


def test_derive_seed_is_stable_31_bit_and_spreads():
    seeds = [derive_seed(7, i) for i in range(1000)]
    assert seeds == [derive_seed(7, i) for i in range(1000)]
    assert all(0 <= s < 2**31 for s in seeds)
    assert len(set(seeds)) == 1000
    assert derive_seed(7, 3) != derive_seed(8, 3)


def test_step_seeds_are_distinct_and_those_of_earlier_runs():
    seeds = [step_seed(base, step) for base in (0, 1, 7, 12345) for step in range(1, 200)]
    assert len(set(seeds)) == len(seeds)
    rollout_seeds = {(2 * s + turn) & 0xFFFFFFFF for s in seeds for turn in (0, 1)}
    assert len(rollout_seeds) == 2 * len(seeds)  # still distinct where `uniforms` reads them
    for base, step in ((0, 1), (3, 17), (12345, 400)):
        assert step_seed(base, step) == (base * 1_000_003 + step) * 64 + 0  # process 0's seed


def test_uniforms_are_deterministic_distinct_and_uniform():
    ctx = torch.arange(20000) // 100
    smp = torch.arange(20000) % 100
    u = uniforms(3, ctx, smp, step=5)
    assert torch.equal(u, uniforms(3, ctx, smp, step=5))
    assert u.dtype == torch.float64 and bool((u >= 0).all() and (u < 1).all())
    assert len(set(u.tolist())) == 20000
    for other in (uniforms(4, ctx, smp, 5), uniforms(3, ctx, smp, 6), uniforms(3, smp, ctx, 5)):
        assert not torch.equal(u, other)
    counts = torch.histc(u.float(), bins=10, min=0, max=1)  # 2000 expected per bin
    chi2 = float(((counts - 2000) ** 2 / 2000).sum())
    assert chi2 < 27.9  # p = 0.001 for 9 degrees of freedom


def _filter_slow(row: list[float], k: int, p: float) -> list[bool]:
    """Which tokens survive top-k then top-p, one token at a time."""
    order = sorted(range(len(row)), key=lambda i: -row[i])
    keep = set(range(len(row)))
    if 0 < k < len(row):
        kth = row[order[k - 1]]
        keep = {i for i in keep if row[i] >= kth}
    if p < 1:
        z = sum(math.exp(row[i]) for i in keep)
        mass, nucleus = 0.0, set()
        for i in order:
            if i not in keep:
                continue
            if mass >= p and nucleus:
                break
            nucleus.add(i)
            mass += math.exp(row[i]) / z
        keep = nucleus
    return [i in keep for i in range(len(row))]


@settings(max_examples=100)
@given(seed=st.integers(0, 10**6), k=st.integers(0, 12), p=st.floats(0.05, 1.0))
def test_filter_matches_slow_loop(seed, k, p):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 10, generator=g, dtype=torch.float64) * 2
    kept = filter_top_k_top_p(logits, k, p) > -math.inf
    for r in range(3):
        slow = _filter_slow(logits[r].tolist(), k, p)
        assert kept[r].tolist() == slow


@settings(max_examples=300)
@given(seed=st.integers(0, 10**6), scale=st.sampled_from([0.3, 1.0, 3.0, 8.0]),
       # masses of equal tokens sit exactly on 1/4, 1/3, 1/2, ...: both must round them alike
       p=st.one_of(st.sampled_from([0.25, 1 / 3, 0.5, 2 / 3, 0.75]), st.floats(0.05, 0.99)),
       candidates=st.integers(1, 12),
       ties=st.booleans(), top_k=st.sampled_from([0, 3, 20]))
def test_nucleus_on_candidates_matches_the_full_sort(seed, scale, p, candidates, ties, top_k):
    # 40 tokens and up to 12 candidates: both the candidate rows and the fallback rows run.
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(6, 40, generator=g, dtype=torch.float64) * scale
    if ties:  # few distinct values, so ties straddle the candidates' edge
        logits = logits.round()
    if top_k:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    fast = nucleus_drop(logits, p, candidates=candidates)
    assert torch.equal(fast, sorted_nucleus_drop(logits, p))


def test_nucleus_of_a_peaked_real_sized_row_needs_no_full_sort():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 49152, generator=g) * 3  # float32, a real vocabulary
    logits[:, :5] += 20  # a chat model's few likely tokens
    assert torch.equal(nucleus_drop(logits, 0.9), sorted_nucleus_drop(logits, 0.9))
    assert int((~nucleus_drop(logits, 0.9)).sum(-1).max()) <= 5


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 4, 1.0), (1.3, 0, 0.8)])
def test_samples_follow_the_filtered_distribution(temperature, top_k, top_p):
    logits = torch.tensor([[2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0]])
    rows = 40000
    u = uniforms(11, torch.zeros(rows, dtype=torch.long), torch.arange(rows), 0)
    tokens, _ = sample_tokens(logits.expand(rows, -1), temperature, top_k, top_p, u)
    expected = torch.softmax(filter_top_k_top_p(logits / temperature, top_k, top_p), -1)[0]
    counts = torch.bincount(tokens, minlength=8).double()
    assert bool((counts[expected == 0] == 0).all())
    live = expected > 0
    exp_counts = expected[live].double() * rows
    chi2 = float(((counts[live] - exp_counts) ** 2 / exp_counts).sum())
    assert chi2 < 24.3  # p = 0.001 for at most 7 degrees of freedom


def test_logprobs_are_before_filtering_at_temperature():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 50, generator=g) * 3
    u = uniforms(0, torch.arange(64), torch.zeros(64, dtype=torch.long), 0)
    tokens, lp = sample_tokens(logits, 0.6, 5, 0.9, u)
    ref = torch.log_softmax(logits / 0.6, -1).gather(-1, tokens[:, None])[:, 0]
    torch.testing.assert_close(lp, ref)
    top5 = torch.topk(logits, 5, dim=-1).indices
    assert bool((top5 == tokens[:, None]).any(-1).all())


def test_greedy_ignores_uniforms_and_uses_plain_softmax():
    logits = torch.tensor([[0.1, 3.0, -1.0], [5.0, 4.9, 0.0]])
    tokens, lp = sample_tokens(logits, 0.0, 0, 1.0, torch.tensor([0.99, 0.0]))
    assert tokens.tolist() == [1, 0]
    torch.testing.assert_close(lp, torch.log_softmax(logits, -1)[[0, 1], [1, 0]])


def test_broken_logits_never_give_nan():
    logits = torch.tensor([[float("nan"), 1.0, float("inf"), -float("inf")],
                           [float("nan")] * 4,
                           [-float("inf")] * 4])
    for temperature in (0.0, 1.0, 1e-6):
        u = torch.tensor([0.3, 0.7, 0.5], dtype=torch.float64)
        tokens, lp = sample_tokens(logits, temperature, 0, 1.0, u)
        assert bool(torch.isfinite(lp).all())
        assert tokens[0].item() == 2  # +inf wins; NaN never sampled over a real token
        assert bool(((tokens >= 0) & (tokens < 4)).all())


def test_uniforms_do_not_degenerate_when_seed_equals_context():
    # seed == context once zeroed the state: every such row drew u = 1.8e-12 at step 0 and
    # followed one fixed stream whatever the seed.
    seeds = [0, 1, 3, 15, 999, 2**31 - 1]
    first = [uniforms(s, torch.tensor([s]), torch.tensor([0]), 0).item() for s in seeds]
    assert len(set(first)) == len(seeds)
    assert min(first) > 1e-6
    streams = [[uniforms(s, torch.tensor([s]), torch.tensor([0]), t).item() for t in range(8)]
               for s in seeds]
    assert len({tuple(x) for x in streams}) == len(seeds)


def test_uniforms_are_not_symmetric_in_their_keys():
    a = torch.arange(1, 201)  # even length: no row keeps its pair when flipped
    zero = torch.zeros_like(a)
    for s in (5, 9, 123):
        swapped = uniforms(s, torch.full_like(a, 9), zero, 3) != uniforms(9, torch.full_like(a, s),
                                                                          zero, 3)
        assert bool(swapped.all()) or s == 9
    # context and sample swapped, seed and step fixed: other draws
    assert bool((uniforms(7, a, a.flip(0), 2) != uniforms(7, a.flip(0), a, 2)).all())


def test_uniforms_are_uniform_and_distinct_over_many_cells():
    # every (seed, context, sample, step) cell of a grid, including seed == context
    grid = torch.cartesian_prod(torch.arange(40), torch.arange(40), torch.arange(8))  # [12800, 3]
    seeds_ctx, ctx, smp = grid[:, 0], grid[:, 1], grid[:, 2]
    u = torch.cat([torch.cat([uniforms(int(s), ctx[seeds_ctx == s], smp[seeds_ctx == s], t)
                              for s in range(40)]) for t in range(4)])  # 51200 cells
    assert len(set(u.tolist())) == u.numel()
    counts = torch.histc(u.float(), bins=20, min=0, max=1)
    expected = u.numel() / 20
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 43.8  # p = 0.001 for 19 degrees of freedom
    assert float(u.min()) > 1e-7  # 51,200 draws: a uniform minimum below 1e-7 has p < 0.006
    # consecutive steps of one stream are uncorrelated
    per_step = u.view(4, -1)
    r = torch.corrcoef(per_step)[0, 1:]
    assert bool((r.abs() < 0.03).all())
