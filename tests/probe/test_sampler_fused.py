"""The probe sampler with the fused decoding step (`decode="fused"`) against the exact one: the
same tokens in nearly every sample, log-probs within the tolerance of
tests/rollout/test_fused_forward.py (which tests the step itself in distribution)."""

from __future__ import annotations

import pytest

from calibrl.errors import UserError
from calibrl.probe.sampler import CachedSampler, ProbeJob
from calibrl.rollout.engine import SamplingParams
from calibrl.rollout.hf_engine import HFEngine
from rollout.test_fused_forward import LOGPROB_ATOL, with_random_norms
from rollout.tiny_lm import build_model


@pytest.fixture(scope="module", params=["llama", "qwen2-gqa"])
def model_under_test(request, model, tokenizer):
    if request.param == "llama":
        return with_random_norms(model)
    return with_random_norms(build_model(len(tokenizer), hidden=32, layers=2, heads=4,
                                         kv_heads=2))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_fused_probe_samples_equal_exact_in_nearly_every_row(model_under_test, tokenizer,
                                                             temperature):
    prefix = tokenizer.encode("<|im_start|>user\nUse [1, 2, 3]<|im_end|>\n<|im_start|>"
                              "assistant\n<think>\n1 + 2 = 3\n3 * 3 = 9\n")
    jobs = [ProbeJob(3, prefix, [4, 9, 15, len(prefix)]), ProbeJob(8, prefix[:12], [6, 12])]
    suffix = tokenizer.encode("</think>\n<answer>")
    params = SamplingParams(n=4, temperature=temperature, max_new_tokens=12,
                            stop=("</answer>",), seed=9)
    gens = {}
    for path in ("exact", "fused"):
        sampler = CachedSampler(HFEngine(model_under_test, tokenizer), max_rows=9, decode=path)
        gens[path] = [g for job in sampler.sample(jobs, suffix, params) for cut in job
                      for g in cut]
    pairs = list(zip(gens["exact"], gens["fused"], strict=True))
    same = [(a, b) for a, b in pairs if a.token_ids == b.token_ids]
    # A sample differs only where rounding (~1e-6) decides between two tokens: rare, so at
    # least 90 % are equal (all were, when written).
    assert len(same) >= 0.9 * len(pairs)
    for a, b in same:
        assert all(abs(x - y) <= LOGPROB_ATOL for x, y in zip(a.logprobs, b.logprobs,
                                                               strict=True))
    # The fused step did run: it rounds differently somewhere.
    assert any(a.logprobs != b.logprobs for a, b in same)


def test_decode_path_defaults_to_the_engine_s(model, tokenizer):
    assert CachedSampler(HFEngine(model, tokenizer, decode="fused")).decode == "fused"
    assert CachedSampler(HFEngine(model, tokenizer)).decode == "exact"
    assert CachedSampler(HFEngine(model, tokenizer, decode="fused"), decode="exact"
                         ).decode == "exact"
    with pytest.raises(UserError, match="decode path"):
        CachedSampler(HFEngine(model, tokenizer), decode="fast")
