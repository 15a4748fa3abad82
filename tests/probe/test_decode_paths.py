"""The engine and the probe's sampler decode through one loop: for the same seed and the same
random streams they give the same tokens."""

from __future__ import annotations

import pytest
import torch

import calibrl.probe.sampler as sampler_module
from calibrl.probe.sampler import CachedSampler, ProbeJob
from calibrl.rollout.engine import SamplingParams
from calibrl.rollout.hf_engine import Branch, HFEngine


@pytest.mark.parametrize("kw", [dict(), dict(temperature=0.7, top_k=5, top_p=0.9),
                                dict(temperature=0.0)])
def test_engine_and_probe_sampler_give_the_same_tokens(model, tokenizer, monkeypatch, kw):
    prefix = tokenizer.encode("<|im_start|>user\nUse [1, 2, 3]<|im_end|>\n<|im_start|>"
                              "assistant\n<think>\n1 + 2 = 3\n3 * 3 = 9\n")
    suffix = tokenizer.encode("</think>\n<answer>")
    cuts = [4, 9, len(prefix)]
    params = SamplingParams(n=3, max_new_tokens=8, stop=("</answer>",), seed=7, **kw)
    engine = HFEngine(model, tokenizer, max_batch_size=4)
    # The engine's stream of a context is its index in the call; give the probe the same ones.
    monkeypatch.setattr(sampler_module, "derive_seed", lambda key, cut: cuts.index(cut))
    probe = CachedSampler(engine, max_rows=5).sample([ProbeJob(0, prefix, cuts)], suffix,
                                                     params)[0]
    direct = engine.generate_from_shared_prefix(prefix, [Branch(c, tuple(suffix)) for c in cuts],
                                                params)
    for by_probe, by_engine in zip(probe, direct, strict=True):
        for a, b in zip(by_probe, by_engine, strict=True):
            assert (a.token_ids, a.text, a.finish_reason) == (b.token_ids, b.text,
                                                              b.finish_reason)
            torch.testing.assert_close(a.logprobs, b.logprobs, atol=1e-4, rtol=1e-4)
    assert len({tuple(g.token_ids) for gens in direct for g in gens}) > 1
