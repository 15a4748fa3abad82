"""The fast decoding step (`calibrl.rollout.fast_forward`) computes what `model(...)` computes,
bit for bit at one shape, so the engine's samples do not change with it (log-probs within the
tolerance `reference.same_samples` explains); and both match a slow reference loop that
re-encodes every whole sequence at every step."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from calibrl.models import build_tiny_model
from calibrl.models import build_tokenizer as build_calibrl_tokenizer
from calibrl.rollout import fast_forward, kv_cache
from calibrl.rollout.engine import SamplingParams
from calibrl.rollout.hf_engine import Branch, HFEngine
from calibrl.rollout.sampling import (
    inverse_cdf,
    inverse_cdf_reference,
    sample_tokens,
    uniforms,
)
from reference.same_samples import assert_same_samples, flatten


@pytest.fixture(scope="module")
def llama():
    tokenizer = build_calibrl_tokenizer()
    return build_tiny_model(tokenizer, hidden_size=64, num_layers=2, num_heads=4).eval(), tokenizer


def _step_logits_both_ways(model, rows=5, context=7):
    torch.manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (rows, context))
    cache = DynamicCache()
    with torch.inference_mode():
        model(input_ids=ids, **kv_cache.with_cache(model, cache), use_cache=True)
        keys = [layer.keys.clone() for layer in cache.layers]
        values = [layer.values.clone() for layer in cache.layers]
        tokens = torch.randint(0, model.config.vocab_size, (rows,))
        pos = torch.full((rows,), context)
        want = model(input_ids=tokens[:, None], position_ids=pos[:, None],
                     **kv_cache.with_cache(model, cache), use_cache=True,
                     logits_to_keep=1).logits[:, -1]

        def attend(module, q, k, v):
            kk = torch.cat([keys[module.layer_idx], k[:, :, None]], 2)
            vv = torch.cat([values[module.layer_idx], v[:, :, None]], 2)
            return fast_forward.sdpa_decode(module, q, kk, vv, None)

        got = fast_forward.StepForward(model, context + 1).forward(tokens, pos, attend)
    return want, got


def test_step_logits_equal_model_call_bitwise(model, llama):
    # Bit-equal whatever the thread count: both sides run the same kernels at the same shapes
    # on the same inputs, and a kernel's split of a reduction depends only on shape and threads.
    for m in (model, llama[0]):  # Qwen2 with grouped kv heads and biases; calibrl's Llama
        assert fast_forward.supported(m)
        want, got = _step_logits_both_ways(m)
        assert torch.equal(want, got)


def test_unsupported_models_take_the_ordinary_path(model):
    handle = model.lm_head.register_forward_hook(lambda *a: None)
    try:
        assert not fast_forward.supported(model)  # a hook may change what a layer computes
    finally:
        handle.remove()
    assert fast_forward.supported(model)
    assert not fast_forward.supported(torch.nn.Linear(2, 2))


def _generate_both_ways(monkeypatch, engine, call):
    fast = call()
    with monkeypatch.context() as m:
        m.setattr(fast_forward, "supported", lambda model: False)
        slow = call()
    return fast, slow


def test_engine_samples_unchanged_and_logprobs_within_tolerance(monkeypatch, model, tokenizer, prompts):
    # Every 9th token ends a sample, so rows finish (and leave the batch) at different steps.
    engine = HFEngine(model, tokenizer, max_batch_size=5,
                      eos_token_ids=range(0, len(tokenizer), 9))
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=16, seed=11,
                            stop=("</answer>",))
    fast, slow = _generate_both_ways(monkeypatch, engine, lambda: engine.generate(prompts, params))
    assert_same_samples(flatten(fast), flatten(slow))
    assert {g.finish_reason for gens in fast for g in gens} == {"stop", "length"}
    branches = [Branch(cut=3, suffix=(5, 6)), Branch(), Branch(cut=1)]
    prefix = prompts[2]
    params = SamplingParams(n=3, temperature=0.8, top_p=0.9, max_new_tokens=12, seed=12)
    fast, slow = _generate_both_ways(
        monkeypatch, engine, lambda: engine.generate_from_shared_prefix(prefix, branches, params))
    assert_same_samples(flatten(fast), flatten(slow))


def _reference_decode(model, prompt, params, stream, sample, eos):
    """The obvious loop: re-encode the whole sequence, sample, append; no cache, no batch."""
    out = []
    ids = list(prompt)
    for step in range(params.max_new_tokens):
        logits = model(input_ids=torch.tensor([ids])).logits[:, -1]
        u = uniforms(params.seed, torch.tensor([stream]), torch.tensor([sample]), step)
        tok, _ = sample_tokens(logits, params.temperature, params.top_k, params.top_p, u)
        out.append(int(tok[0]))
        ids.append(out[-1])
        if out[-1] in eos:
            break
    return out


def test_engine_matches_a_slow_reference_loop(llama):
    model, tokenizer = llama
    prompts = [tokenizer.encode(t) for t in ("Using the numbers [3, 5]", "<think>\n4 +", "9")]
    engine = HFEngine(model, tokenizer, max_batch_size=4)
    params = SamplingParams(n=2, temperature=1.0, max_new_tokens=12, seed=5)
    got = engine.generate(prompts, params)
    with torch.inference_mode():
        for i, prompt in enumerate(prompts):
            for s in range(params.n):
                want = _reference_decode(model, prompt, params, i, s, engine.eos_token_ids)
                assert got[i][s].token_ids == want


def test_inverse_cdf_equals_the_sequential_running_sum(monkeypatch):
    from calibrl.rollout import sampling

    monkeypatch.setattr(sampling, "_SMALL", 0)  # the blocked search at every size
    torch.manual_seed(0)
    for vocab in (5, 64, 100, 2035):
        logits = torch.randn(300, vocab) * torch.rand(300, 1) * 12
        logits[::3, ::2] = -torch.inf  # filtered tokens: probability 0
        probs = torch.softmax(logits, dim=-1)
        u = uniforms(7, torch.arange(300), torch.zeros(300, dtype=torch.long), vocab)
        u[:4] = torch.tensor([0.0, 1 - 2**-53, 0.5, 1e-12], dtype=torch.float64)
        tokens = inverse_cdf(probs, u)
        assert torch.equal(tokens, inverse_cdf_reference(probs, u))
        assert bool((probs.gather(-1, tokens[:, None]) > 0).all())


def test_uniforms_from_a_stream_state_are_uniforms():
    from calibrl.rollout.sampling import stream_state, uniforms_at

    context, sample = torch.arange(50) % 7, torch.arange(50) // 7
    state = stream_state(123, context, sample)
    for step in (0, 1, 77, 2**31 + 5):
        assert torch.equal(uniforms_at(state, step), uniforms(123, context, sample, step))
