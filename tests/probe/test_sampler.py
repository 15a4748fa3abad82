"""The cached probe sampler against the obvious loop, and its batch invariance."""

from __future__ import annotations

import pytest
import torch

from calibrl.errors import UserError
from calibrl.probe.sampler import CachedSampler, EngineSampler, ProbeJob
from calibrl.rollout.engine import Generation, SamplingParams
from calibrl.rollout.hf_engine import HFEngine
from calibrl.rollout.sampling import derive_seed, sample_tokens, uniforms
from reference.same_samples import assert_same_samples, flatten
from rollout.tiny_lm import build_model

PARAMS = SamplingParams(n=2, temperature=1.0, max_new_tokens=5, stop=("</answer>",), seed=5)


@pytest.fixture(scope="module", params=["llama", "qwen2-gqa"])
def engine(request, model, tokenizer):
    if request.param == "llama":
        return HFEngine(model, tokenizer)
    # Grouped-query attention (4 query heads, 2 kv heads) and another model class.
    return HFEngine(build_model(len(tokenizer), hidden=32, layers=2, heads=4, kv_heads=2),
                    tokenizer)


@pytest.fixture(scope="module")
def jobs(tokenizer):
    a = tokenizer.encode("<|im_start|>user\nUse [1, 2, 3]<|im_end|>\n<|im_start|>assistant\n"
                         "<think>\n1 + 2 = 3\n3 * 3 = 9\n")
    b = tokenizer.encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\nok")
    return [ProbeJob(3, a, [4, 9, len(a)]), ProbeJob(8, b, [len(b) - 1, len(b)]),
            ProbeJob(1, a[:5], [0, 5])]


@pytest.fixture(scope="module")
def suffix(tokenizer):
    return tokenizer.encode("</think>\n<answer>")


def slow_sample(engine, prefix, cut, suffix, key, s, params=PARAMS):
    """Sample `s` of one point: re-encode the whole context at every step, no cache."""
    ids, out = list(prefix[:cut]) + list(suffix), []
    ctx = torch.tensor([derive_seed(key, cut)])
    for step in range(params.max_new_tokens):
        with torch.no_grad():
            logits = engine.model(torch.tensor([ids])).logits[:, -1]
        u = uniforms(params.seed, ctx, torch.tensor([s]), step)
        token = int(sample_tokens(logits, params.temperature, 0, 1.0, u)[0])
        out.append(token)
        ids.append(token)
        if token in engine.eos_token_ids or "</answer>" in engine.tokenizer.decode(out):
            break
    return out


def token_ids(results):
    return [[[g.token_ids for g in cut] for cut in job] for job in results]


def test_cached_sampler_equals_the_slow_loop(engine, jobs, suffix):
    results = CachedSampler(engine, max_rows=7).sample(jobs, suffix, PARAMS)
    for job, per_job in zip(jobs, results, strict=True):
        for cut, gens in zip(job.cuts, per_job, strict=True):
            assert len(gens) == PARAMS.n
            for s, gen in enumerate(gens):
                assert gen.token_ids == slow_sample(engine, job.prefix, cut, suffix, job.key, s)
                assert gen.text == engine.tokenizer.decode(gen.token_ids, skip_special_tokens=True)
                assert len(gen.logprobs) == len(gen.token_ids)


def test_samples_do_not_depend_on_batching(engine, jobs, suffix):
    reference = token_ids(CachedSampler(engine, max_rows=1000).sample(jobs, suffix, PARAMS))
    assert token_ids(CachedSampler(engine, max_rows=2).sample(jobs, suffix, PARAMS)) == reference
    reversed_ = CachedSampler(engine).sample(jobs[::-1], suffix, PARAMS)[::-1]
    assert token_ids(reversed_) == reference
    alone = CachedSampler(engine).sample(jobs[1:2], suffix, PARAMS)
    assert token_ids(alone) == reference[1:2]


def test_each_prefix_is_encoded_once(engine, jobs, suffix):
    sampler = CachedSampler(engine, max_rows=1000)
    sampler.sample(jobs, suffix, PARAMS)
    longest = sum(max(job.cuts) for job in jobs)
    points = sum(len(job.cuts) for job in jobs)
    assert sampler.stats.prefill_tokens == longest + points * len(suffix)


def test_empty_suffix_continues_the_context(engine, jobs):
    job = jobs[0]
    results = CachedSampler(engine).sample([job], [], PARAMS)
    for cut, gens in zip(job.cuts, results[0], strict=True):
        assert [g.token_ids for g in gens] == [slow_sample(engine, job.prefix, cut, [], job.key, s)
                                              for s in range(PARAMS.n)]
    with pytest.raises(UserError):
        CachedSampler(engine).sample([ProbeJob(0, [1, 2], [0])], [], PARAMS)


def test_bad_cuts_and_lengths_are_user_errors(engine, jobs, suffix):
    with pytest.raises(UserError, match="outside"):
        CachedSampler(engine).sample([ProbeJob(0, [1, 2], [3])], suffix, PARAMS)
    long = ProbeJob(0, [5] * 510, [510])
    with pytest.raises(UserError, match="positions"):
        CachedSampler(engine).sample([long], suffix, PARAMS)
    with pytest.raises(UserError, match="seeded"):
        CachedSampler(engine).sample(jobs, suffix, SamplingParams(n=1))


class RecordingEngine:
    def __init__(self):
        self.prompts, self.params = [], None

    def generate(self, prompts, params):
        self.prompts, self.params = [list(p) for p in prompts], params
        return [[Generation([len(p), s], "", [0.0, 0.0], "stop") for s in range(params.n)]
                for p in prompts]

    def update_weights(self, model):
        pass


def test_engine_sampler_sends_full_contexts_and_regroups(jobs, suffix):
    engine = RecordingEngine()
    results = EngineSampler(engine).sample(jobs, suffix, PARAMS)
    assert engine.prompts == [job.prefix[:c] + suffix for job in jobs for c in job.cuts]
    assert engine.params.n == PARAMS.n and engine.params.seed == derive_seed(5, jobs[0].key)
    for job, per_job in zip(jobs, results, strict=True):
        assert [[g.token_ids[0] for g in gens] for gens in per_job] == [
            [c + len(suffix)] * PARAMS.n for c in job.cuts]


def test_engine_sampler_with_the_hf_engine(engine, jobs, suffix):
    results = EngineSampler(engine).sample(jobs, suffix, PARAMS)
    assert [[len(g) for g in job] for job in results] == [[2] * len(j.cuts) for j in jobs]


def test_fast_step_gives_the_ordinary_forward_s_samples(engine, jobs, suffix,
                                                                    monkeypatch):
    """`fast_forward.StepForward` runs the layers as `model(...)` does: same tokens, log-probs
    within the tolerance `reference.same_samples` explains."""
    from calibrl.rollout import fast_forward

    assert fast_forward.supported(engine.model)
    fast = CachedSampler(engine, max_rows=9).sample(jobs, suffix, PARAMS)
    monkeypatch.setattr(fast_forward, "supported", lambda model: False)
    slow = CachedSampler(engine, max_rows=9).sample(jobs, suffix, PARAMS)
    assert [len(job) for job in fast] == [len(job) for job in slow]
    for fast_job, slow_job in zip(fast, slow, strict=True):
        assert_same_samples(flatten(fast_job), flatten(slow_job), with_text=False)
