"""SamplingParams validation, the engine factory and chunk planning."""

from __future__ import annotations

import importlib.util

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibrl.errors import UserError
from calibrl.rollout.engine import Engine, SamplingParams
from calibrl.rollout.factory import make_engine
from calibrl.rollout.hf_engine import HFEngine, plan_chunks


@pytest.mark.parametrize("kw", [dict(n=0), dict(temperature=-0.1), dict(temperature=float("nan")),
                                dict(top_p=0.0), dict(top_p=1.5), dict(top_k=-1),
                                dict(max_new_tokens=0), dict(stop=("",)), dict(seed=1.5)])
def test_bad_sampling_params_are_user_errors(kw):
    with pytest.raises(UserError):
        SamplingParams(**kw)


def test_stop_accepts_a_string_or_a_list():
    assert SamplingParams(stop="</answer>").stop == ("</answer>",)
    assert SamplingParams(stop=["a", "b"]).stop == ("a", "b")
    assert not SamplingParams().filtered and SamplingParams(top_p=0.9).filtered


def test_make_engine(model, tokenizer):
    engine = make_engine("hf", model, tokenizer, max_batch_size=8)
    assert isinstance(engine, HFEngine) and isinstance(engine, Engine)
    assert engine.max_batch_size == 8
    with pytest.raises(UserError, match="unknown engine 'sglang'"):
        make_engine("sglang", model, tokenizer)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_vllm_engine_without_vllm_says_how_to_install(model, tokenizer):
    with pytest.raises(UserError, match=r"calibrl\[vllm\]"):
        make_engine("vllm", model, tokenizer)


@given(contexts=st.integers(0, 20), n=st.integers(1, 20), rows=st.integers(1, 33))
def test_plan_chunks_covers_every_sample_once_within_the_row_bound(contexts, n, rows):
    chunks = plan_chunks(contexts, n, rows)
    seen = [(c, first + j) for chunk in chunks for c, first, count in chunk for j in range(count)]
    assert sorted(seen) == [(c, s) for c in range(contexts) for s in range(n)]
    assert all(sum(count for _, _, count in chunk) <= rows for chunk in chunks)
    assert all(len({c for c, _, _ in chunk}) == len(chunk) for chunk in chunks)
    encodings = sum(len(chunk) for chunk in chunks)  # one prefill per (chunk, context)
    assert encodings <= contexts + len(chunks)
    assert len(chunks) == -(-contexts * n // rows)  # no chunk is left partly empty but the last
