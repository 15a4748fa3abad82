"""HFEngine on a tiny random model: shapes, seeds, stops, log-probs and cache reuse."""

from __future__ import annotations

import copy

import pytest
import torch

from calibrl.errors import UserError
from calibrl.rollout.engine import Engine, SamplingParams
from calibrl.rollout.hf_engine import Branch, HFEngine
from calibrl.rollout.sampling import sample_tokens, uniforms
from calibrl.rollout.stopping import decode


def reference_generate(model, tokenizer, prompts, params, eos_ids):
    """The obvious loop: one sample at a time, the whole sequence re-encoded at every step
    (no cache, no padding), the stop test on the fully decoded text."""
    out = []
    for c, prompt in enumerate(prompts):
        samples = []
        for s in range(params.n):
            toks, reason = [], "length"
            for step in range(params.max_new_tokens):
                with torch.no_grad():
                    logits = model(torch.tensor([prompt + toks])).logits[:, -1]
                u = uniforms(params.seed, torch.tensor([c]), torch.tensor([s]), step)
                t, _ = sample_tokens(logits, params.temperature, params.top_k, params.top_p, u)
                toks.append(int(t))
                text = decode(tokenizer, toks)
                if toks[-1] in eos_ids or any(x in text for x in params.stop):
                    reason = "stop"
                    break
            samples.append((toks, reason))
        out.append(samples)
    return out


def teacher_forced_logprobs(model, context, tokens, temperature):
    with torch.no_grad():
        logits = model(torch.tensor([context + tokens])).logits[0].float()
    logits = logits[len(context) - 1:-1] / (temperature or 1.0)
    return torch.log_softmax(logits, -1)[torch.arange(len(tokens)), torch.tensor(tokens)]


def tokens_of(result):
    return [[(g.token_ids, g.finish_reason) for g in gens] for gens in result]


@pytest.fixture()
def engine(model, tokenizer):
    return HFEngine(model, tokenizer, max_batch_size=4)


def test_is_an_engine_and_returns_n_samples_per_prompt(engine, tokenizer, prompts):
    assert isinstance(engine, Engine)
    params = SamplingParams(n=3, max_new_tokens=12, seed=0)
    result = engine.generate(prompts, params)
    assert len(result) == len(prompts) and all(len(g) == 3 for g in result)
    for gens in result:
        for g in gens:
            assert 1 <= len(g.token_ids) <= 12 and len(g.logprobs) == len(g.token_ids)
            assert g.text == decode(tokenizer, g.token_ids)
            assert g.finish_reason == ("length" if g.token_ids[-1] != tokenizer.eos_token_id
                                       and len(g.token_ids) == 12 else "stop")
    assert engine.generate([], params) == []


@pytest.mark.parametrize("kw", [dict(), dict(temperature=0.7, top_k=5), dict(top_p=0.8),
                                dict(temperature=0.0)])
def test_samples_equal_the_no_cache_reference(model, tokenizer, prompts, kw):
    """Prefill once + expand + padded batches + dropped rows == re-encoding everything."""
    params = SamplingParams(n=2, max_new_tokens=10, seed=5, stop=("e", "a"), **kw)
    got = HFEngine(model, tokenizer, max_batch_size=4).generate(prompts, params)
    ref = reference_generate(model, tokenizer, prompts, params, {tokenizer.eos_token_id})
    assert tokens_of(got) == ref
    if params.temperature > 0:  # rows finished at different steps and left the batch
        assert len({len(toks) for gens in ref for toks, _ in gens}) > 2


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.5, 3, 0.9), (0.0, 0, 1.0)])
def test_logprobs_equal_a_teacher_forced_forward(engine, model, prompts, temperature, top_k, top_p):
    params = SamplingParams(n=2, max_new_tokens=15, seed=1, temperature=temperature,
                            top_k=top_k, top_p=top_p)
    for prompt, gens in zip(prompts, engine.generate(prompts, params), strict=True):
        for g in gens:
            ref = teacher_forced_logprobs(model, prompt, g.token_ids, temperature)
            torch.testing.assert_close(torch.tensor(g.logprobs), ref, atol=1e-4, rtol=1e-4)


def test_same_seed_same_samples_other_seed_other_samples(engine, prompts):
    params = SamplingParams(n=4, max_new_tokens=12, seed=3)
    first = tokens_of(engine.generate(prompts, params))
    assert tokens_of(engine.generate(prompts, params)) == first
    other = tokens_of(engine.generate(prompts, SamplingParams(n=4, max_new_tokens=12, seed=4)))
    assert other != first
    assert len({tuple(t) for t, _ in first[0]}) > 1  # the n samples of a prompt differ


def test_seed_none_follows_torch_global_rng(engine, prompts):
    params = SamplingParams(n=2, max_new_tokens=8)
    torch.manual_seed(123)
    a = tokens_of(engine.generate(prompts, params))
    torch.manual_seed(123)
    assert tokens_of(engine.generate(prompts, params)) == a


def test_batch_size_does_not_change_samples(model, tokenizer, prompts):
    params = SamplingParams(n=3, max_new_tokens=8, seed=9)
    results = [tokens_of(HFEngine(model, tokenizer, max_batch_size=b).generate(prompts, params))
               for b in (1, 4, 64)]
    assert all(r == results[0] for r in results[1:])


def test_shared_prefix_equals_generate_on_concatenated_contexts(model, tokenizer):
    prefix = tokenizer.encode("<think> 7 - 3 = 4 and 4 * 2 = 8 </think>")
    suffix = tuple(tokenizer.encode(" <answer>"))
    branches = [Branch(0, suffix), Branch(5, suffix), Branch(len(prefix) // 2, ()),
                Branch(None, suffix), Branch(None, ())]
    params = SamplingParams(n=2, max_new_tokens=8, seed=2)
    engine = HFEngine(model, tokenizer, max_batch_size=4)
    got = engine.generate_from_shared_prefix(prefix, branches, params)
    contexts = [prefix[:len(prefix) if b.cut is None else b.cut] + list(b.suffix) for b in branches]
    want = HFEngine(model, tokenizer, max_batch_size=4).generate(contexts, params)
    assert tokens_of(got) == tokens_of(want)
    for ctx, gens in zip(contexts, got, strict=True):
        for g in gens:
            torch.testing.assert_close(torch.tensor(g.logprobs),
                                       teacher_forced_logprobs(model, ctx, g.token_ids, 1.0),
                                       atol=1e-4, rtol=1e-4)


def test_prefix_is_encoded_once_and_each_context_once(model, tokenizer, prompts):
    engine = HFEngine(model, tokenizer, max_batch_size=8)
    engine.generate(prompts, SamplingParams(n=8, max_new_tokens=2, seed=0))
    assert engine.stats.prefill_tokens == sum(len(p) for p in prompts)
    engine.stats.reset()
    prefix = prompts[0]
    engine.generate_from_shared_prefix(prefix, [Branch(3, (5, 6)), Branch(None, (7,))],
                                       SamplingParams(n=4, max_new_tokens=2, seed=0))
    assert engine.stats.prefill_tokens == len(prefix) + 3


def test_stop_string_ends_at_the_completing_token(model, tokenizer, prompts):
    """Greedy text without stops, then a stop string spanning two tokens of it."""
    free = HFEngine(model, tokenizer, eos_token_ids=()).generate(
        prompts[:1], SamplingParams(temperature=0.0, max_new_tokens=20))[0][0].token_ids
    pieces = [decode(tokenizer, [t]) for t in free]
    a = next(i for i in range(1, 19) if pieces[i] and pieces[i + 1]
             and "\ufffd" not in pieces[i] + pieces[i + 1]
             and decode(tokenizer, free[i:i + 2]) == pieces[i] + pieces[i + 1])
    stop = pieces[a][-1] + pieces[a + 1][0]  # last char of one token + first of the next
    end = next(j for j in range(1, 21) if stop in decode(tokenizer, free[:j]))
    g = HFEngine(model, tokenizer, eos_token_ids=()).generate(
        prompts[:1], SamplingParams(temperature=0.0, max_new_tokens=20, stop=("zzz", stop)))[0][0]
    assert g.token_ids == free[:end] and g.finish_reason == "stop" and stop in g.text
    assert stop not in decode(tokenizer, free[:end - 1])


def test_eos_stops_and_is_kept(model, tokenizer, prompts):
    free = HFEngine(model, tokenizer, eos_token_ids=()).generate(
        prompts[:1], SamplingParams(temperature=0.0, max_new_tokens=12))[0][0].token_ids
    eos = free[4]
    g = HFEngine(model, tokenizer, eos_token_ids=[eos]).generate(
        prompts[:1], SamplingParams(temperature=0.0, max_new_tokens=12))[0][0]
    assert g.token_ids == free[:free.index(eos) + 1] and g.finish_reason == "stop"


def test_max_new_tokens_is_reported_as_length(model, tokenizer, prompts):
    engine = HFEngine(model, tokenizer, eos_token_ids=())
    for gens in engine.generate(prompts, SamplingParams(n=2, max_new_tokens=5, seed=0)):
        assert all(len(g.token_ids) == 5 and g.finish_reason == "length" for g in gens)


def test_training_mode_is_restored_and_weights_update(model, tokenizer, prompts):
    trained = copy.deepcopy(model).train()
    engine = HFEngine(model, tokenizer)
    params = SamplingParams(n=2, max_new_tokens=6, seed=0)
    before = tokens_of(engine.generate(prompts, params))
    with torch.no_grad():
        trained.lm_head.weight.mul_(-1.0)
    engine.update_weights(trained)
    after = tokens_of(engine.generate(prompts, params))
    assert trained.training and after != before
    assert after == tokens_of(HFEngine(trained.eval(), tokenizer).generate(prompts, params))


def test_nan_logits_never_surface(model, tokenizer, prompts):
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.lm_head.weight[7] = float("nan")
    result = HFEngine(broken, tokenizer).generate(prompts, SamplingParams(n=3, max_new_tokens=8,
                                                                          seed=0))
    for gens in result:
        for g in gens:
            assert 7 not in g.token_ids and all(lp == lp and lp > -1e9 for lp in g.logprobs)


def test_bad_input_is_a_user_error(engine, prompts):
    with pytest.raises(UserError, match="prompt 1 is empty"):
        engine.generate([prompts[0], []], SamplingParams())
    with pytest.raises(UserError, match="exceeds the model's 512 positions"):
        engine.generate(prompts, SamplingParams(max_new_tokens=510))
    with pytest.raises(UserError, match="cut 99"):
        engine.generate_from_shared_prefix([1, 2], [Branch(99, (3,))], SamplingParams())
    with pytest.raises(UserError, match="empty"):
        engine.generate_from_shared_prefix([1, 2], [Branch(0, ())], SamplingParams())
    with pytest.raises(UserError):
        HFEngine(engine.model, engine.tokenizer, max_batch_size=0)
