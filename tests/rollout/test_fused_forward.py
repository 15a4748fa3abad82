"""The fused decoding step (`calibrl.rollout.fused_forward`, `decode="fused"`) rounds differently
from the exact path, so it is tested equal in distribution to it, not bit for bit: log-probs
within a tolerance, sampled-token frequencies by a chi-square test, and the engine's greedy
tokens equal in (nearly) every row."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from calibrl.errors import UserError
from calibrl.models import build_tiny_model
from calibrl.models import build_tokenizer as build_calibrl_tokenizer
from calibrl.rollout import fast_forward, fused_forward, kv_cache
from calibrl.rollout.engine import SamplingParams
from calibrl.rollout.factory import make_engine
from calibrl.rollout.hf_engine import Branch, HFEngine
from calibrl.rollout.sampling import sample_tokens, uniforms

# Float32 rounding differs by ~1e-7 relative per operation; over a few layers of sums of up to a
# few hundred terms the log-probs (|logit| up to ~12 here) move by a few 1e-6 (measured: 1e-6 to
# 5e-6). 1e-4 is well above that and far below any real error (a wrong norm, rotary sign or mask
# moves log-probs by 1e-2 or more; `test_tolerance_catches_a_bug`: 16).
LOGPROB_ATOL = 1e-4


def with_random_norms(model, seed=0):
    """A copy of `model` whose RMSNorm weights are drawn from [0.5, 1.5]. A fresh model's are
    all 1, which would make folding them into the products exact and leave it untested."""
    model = copy.deepcopy(model)
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(0.5 + torch.rand_like(p))
    return model


@pytest.fixture(scope="module")
def model(model):  # the session's tiny Qwen2 with random norm weights
    return with_random_norms(model)


@pytest.fixture(scope="module")
def llama():
    tokenizer = build_calibrl_tokenizer()
    model = build_tiny_model(tokenizer, hidden_size=64, num_layers=2, num_heads=4).eval()
    return with_random_norms(model), tokenizer


def _step_logits(model, path: str, rows=6, context=9, padded=True):
    """Next-token logits `[R, V]` after a cached context (the rows' first slots hidden by
    padding when `padded`), through the step and attention of decode path `path`."""
    torch.manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (rows, context))
    mask = torch.ones(rows, context + 1, dtype=torch.bool)
    if padded:
        mask[::2, :3] = False  # every other row left-padded by three slots
    cache = DynamicCache()
    chosen = fused_forward.decode_path(path)
    with torch.inference_mode():
        model(input_ids=ids, attention_mask=mask[:, :context].long(),
              **kv_cache.with_cache(model, cache), use_cache=True)
        kv_cache.zero_hidden_slots(cache, mask[:, :context])  # as the engine does
        tokens = torch.randint(0, model.config.vocab_size, (rows,))
        pos = mask[:, :context].sum(1)

        def attend(module, q, k, v):
            layer = cache.layers[module.layer_idx]
            keys = torch.cat([layer.keys, k[:, :, None]], 2)
            values = torch.cat([layer.values, v[:, :, None]], 2)
            return chosen.attention(module, q, keys, values, mask[:, None, None])

        return chosen.step(model, context + 1).forward(tokens, pos, attend)


def _logprob_gap(model, **kw) -> float:
    exact = torch.log_softmax(_step_logits(model, "exact", **kw), -1)
    fused = torch.log_softmax(_step_logits(model, "fused", **kw), -1)
    return float((exact - fused).abs().max())


def _llama_with_biases():
    config = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         attention_bias=True, mlp_bias=True, max_position_embeddings=64)
    torch.manual_seed(2)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):  # initialised to zero, which would leave them untested
                p.normal_(0, 0.1)
    return with_random_norms(model)


def test_fused_step_logprobs_equal_exact_within_tolerance(model, llama):
    # Qwen2 with grouped kv heads and q/k/v biases; calibrl's Llama (tied head); a Llama with
    # every bias (attention and MLP). With and without padding (the attention's mask).
    for m in (model, llama[0], _llama_with_biases()):
        for padded in (True, False):
            assert _logprob_gap(m, padded=padded) <= LOGPROB_ATOL


def test_tolerance_catches_a_bug(monkeypatch, model):
    # A plausible slip (the norm's epsilon left out of the fused step) is well outside it.
    monkeypatch.setattr(fused_forward, "_unit_rms", lambda x, eps: x * x.pow(2).mean(
        -1, keepdim=True).add_(0.1).rsqrt_())
    assert _logprob_gap(model) > 100 * LOGPROB_ATOL


def test_broadcast_attention_equals_sdpa(model):
    torch.manual_seed(0)
    module = model.model.layers[0].self_attn
    q = torch.randn(5, 4, 16)  # [R, Hq, D]; two kv heads: grouped queries
    keys, values = torch.randn(5, 2, 11, 16), torch.randn(5, 2, 11, 16)
    visible = torch.rand(5, 1, 1, 11) > 0.3
    visible[..., -1] = True
    for mask in (visible, None):
        want = fast_forward.sdpa_decode(module, q, keys, values, mask)
        got = fused_forward.broadcast_attention(module, q, keys, values, mask)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


def test_products_equal_a_plain_linear_at_every_row_count():
    # oneDNN's packed product from `PACKED_FROM` rows up, `torch.mm` below: both within float
    # rounding of `F.linear` (the products' sums have 64 terms here: ~1e-6 of their size).
    torch.manual_seed(3)
    weight, bias = torch.randn(96, 64), torch.randn(96)
    product = fused_forward._Product(weight, bias)
    for rows in (1, fused_forward.PACKED_FROM - 1, fused_forward.PACKED_FROM, 37):
        x = torch.randn(rows, 64)
        want = torch.nn.functional.linear(x, weight, bias)
        torch.testing.assert_close(product(x), want, rtol=1e-5, atol=1e-5)


def chi_square_p(a: torch.Tensor, b: torch.Tensor, min_count: int = 10) -> float:
    """p-value of the two-sample chi-square test that counts `a`, `b` `[V]` (equal totals) come
    from one distribution. Tokens rarer than `min_count` in both are pooled into one bin (the
    test's normal approximation needs a few counts per bin)."""
    rare = (a + b) < min_count
    a = torch.cat([a[~rare], a[rare].sum()[None]]).double()
    b = torch.cat([b[~rare], b[rare].sum()[None]]).double()
    keep = (a + b) > 0
    a, b = a[keep], b[keep]
    stat = ((a - b) ** 2 / (a + b)).sum()
    dof = torch.tensor(len(a) - 1, dtype=torch.float64)
    return float(torch.special.gammaincc(dof / 2, stat / 2))  # upper tail of chi2(dof)


def _token_counts(logits: torch.Tensor, seed: int, draws: int = 20_000) -> torch.Tensor:
    """Counts `[V]` of tokens drawn from `softmax(logits)` `[V]` at temperature 1, with the
    engine's sampler and `draws` uniforms of stream `seed`."""
    u = uniforms(seed, torch.arange(draws), torch.zeros(draws, dtype=torch.long), 0)
    tokens, _ = sample_tokens(logits.expand(draws, -1), 1.0, 0, 1.0, u)
    return torch.bincount(tokens, minlength=logits.shape[-1])


def test_sampled_frequencies_equal_exact_by_chi_square(model):
    # Independent draws (different seeds) from each path's distribution: under "same
    # distribution" the statistic is chi2(dof) and p uniform; we reject below 1e-3. The seeds
    # are fixed, so the test is deterministic (p = 0.14-0.58 over the six rows when written).
    # Temperature 2 spreads the sharpened tiny model's samples over ~60-120 tokens.
    exact = _step_logits(model, "exact") / 2
    fused = _step_logits(model, "fused") / 2
    for row in range(len(exact)):
        a, b = _token_counts(exact[row], seed=10 + row), _token_counts(fused[row], seed=50 + row)
        assert (a >= 10).sum() > 20  # the test has bins to compare
        assert chi_square_p(a, b) > 1e-3
        # The same test rejects a slightly wrong distribution (every logit moved by noise of
        # 0.2, a small error next to a real bug's): p < 1e-18 on every row when written.
        torch.manual_seed(row)
        wrong = exact[row] + 0.2 * torch.randn_like(exact[row])
        assert chi_square_p(a, _token_counts(wrong, seed=50 + row)) < 1e-3


def test_engine_greedy_tokens_equal_in_nearly_every_row(model, tokenizer, prompts, llama):
    # Greedy tokens differ only where the two best logits are within float rounding (~1e-5) of
    # each other, which on these sharpened random models is rare; a wrong step changes most
    # rows. We assert at least 90 % of rows identical (all were, when written), and the
    # log-probs of identical rows within the tolerance.
    for m, tok, texts in ((model, tokenizer, prompts), (llama[0], llama[1], None)):
        if texts is None:
            texts = [tok.encode(t) for t in ("Using the numbers [3, 5]", "<think>\n4 +", "9",
                                             "Using the numbers [12, 3, 7], create")]
        params = SamplingParams(n=3, temperature=0.0, max_new_tokens=24, seed=3)
        rows = {}
        for path in ("exact", "fused"):
            engine = make_engine("hf", m, tok, max_batch_size=5, decode=path,
                                 eos_token_ids=range(0, len(tok), 9))
            rows[path] = [g for gens in engine.generate(texts, params) for g in gens]
            branches = [Branch(cut=3, suffix=(5, 6)), Branch(), Branch(cut=1)]
            rows[path] += [g for gens in engine.generate_from_shared_prefix(
                texts[0], branches, params) for g in gens]
        same = [a.token_ids == b.token_ids for a, b in zip(rows["exact"], rows["fused"],
                                                           strict=True)]
        assert sum(same) >= 0.9 * len(same)
        for a, b, s in zip(rows["exact"], rows["fused"], same, strict=True):
            if s:
                gaps = [abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)]
                assert max(gaps) <= LOGPROB_ATOL


def test_engine_sampled_tokens_equal_in_nearly_every_row(model, tokenizer, prompts):
    # With the same uniforms a sample differs only where a uniform falls within ~1e-6 of a
    # boundary of the inverse CDF (once in ~1e5 draws); 90 % leaves room for the cascade
    # after one such flip.
    params = SamplingParams(n=4, temperature=1.0, top_p=0.95, max_new_tokens=16, seed=4)
    gens = {path: [g for gs in HFEngine(model, tokenizer, decode=path).generate(prompts, params)
                   for g in gs] for path in ("exact", "fused")}
    same = [a.token_ids == b.token_ids for a, b in zip(gens["exact"], gens["fused"], strict=True)]
    assert sum(same) >= 0.9 * len(same)


def test_unknown_path_and_unsupported_models(monkeypatch, model, tokenizer, prompts):
    with pytest.raises(UserError, match="decode path"):
        HFEngine(model, tokenizer, decode="compiled")
    # A model the fast steps do not support takes `model(...)` whatever the path: the same
    # samples as the exact path's fallback.
    monkeypatch.setattr(fast_forward, "supported", lambda m: False)
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=5)
    a = HFEngine(model, tokenizer, decode="fused").generate(prompts, params)
    b = HFEngine(model, tokenizer).generate(prompts, params)
    assert [[g.token_ids for g in x] for x in a] == [[g.token_ids for g in x] for x in b]
