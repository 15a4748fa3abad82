"""GPU-only checks: HFEngine on CUDA and the vLLM engine. Run with `scripts/gpu_tests.sh`.

Every test here is marked `gpu` (deselected by default) and skips cleanly without CUDA or vLLM.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from calibrl.errors import UserError
from calibrl.rollout.engine import SamplingParams
from calibrl.rollout.hf_engine import HFEngine
from calibrl.rollout.stopping import decode
from rollout.tiny_lm import build_model, build_tokenizer

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    return torch.device("cuda")


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def gpu_model(cuda, tok):
    # head_dim 64: a size every vLLM attention backend supports.
    return build_model(len(tok), hidden=128, heads=2, kv_heads=1).to(cuda)


@pytest.fixture(scope="module")
def vllm_engine(gpu_model, tok, tmp_path_factory):
    pytest.importorskip("vllm")
    from calibrl.rollout.vllm_engine import VLLMEngine

    path = tmp_path_factory.mktemp("tiny_qwen2")
    gpu_model.save_pretrained(path)
    tok.save_pretrained(path)
    return VLLMEngine.from_model(gpu_model, tok, model_path=str(path), dtype="float16",
                                 gpu_memory_utilization=0.2, llm_kwargs={"enforce_eager": True})


def teacher_forced(model, context, tokens, temperature=1.0):
    ids = torch.tensor([context + tokens], device=next(model.parameters()).device)
    with torch.no_grad():
        logits = model(ids).logits[0, len(context) - 1:-1].float() / (temperature or 1.0)
    return torch.log_softmax(logits, -1)[torch.arange(len(tokens)), torch.tensor(tokens)].cpu()


def prompts_for(tok):
    return [tok.encode(t) for t in ("Using the numbers [3, 5, 7], create", "<think> 7 - 3",
                                    "How confident are you? <analysis>")]


def test_hf_engine_on_cuda_matches_teacher_forcing(gpu_model, tok):
    prompts = prompts_for(tok)
    params = SamplingParams(n=4, max_new_tokens=16, seed=0, temperature=0.8, top_k=20)
    result = HFEngine(gpu_model, tok, max_batch_size=5).generate(prompts, params)
    again = HFEngine(gpu_model, tok, max_batch_size=64).generate(prompts, params)
    assert [[g.token_ids for g in gs] for gs in result] == [[g.token_ids for g in gs] for gs in again]
    for prompt, gens in zip(prompts, result, strict=True):
        for g in gens:
            torch.testing.assert_close(torch.tensor(g.logprobs),
                                       teacher_forced(gpu_model, prompt, g.token_ids, 0.8),
                                       atol=1e-3, rtol=1e-3)


def test_vllm_shapes_text_and_logprobs(vllm_engine, gpu_model, tok):
    prompts = prompts_for(tok)
    result = vllm_engine.generate(prompts, SamplingParams(n=3, max_new_tokens=12, seed=1))
    assert len(result) == 3 and all(len(gs) == 3 for gs in result)
    for prompt, gens in zip(prompts, result, strict=True):
        for g in gens:
            assert 1 <= len(g.token_ids) <= 12 and len(g.logprobs) == len(g.token_ids)
            assert g.text == decode(tok, g.token_ids)
            assert g.finish_reason == "length" or g.token_ids[-1] == tok.eos_token_id
            ref = teacher_forced(gpu_model, prompt, g.token_ids)
            torch.testing.assert_close(torch.tensor(g.logprobs), ref, atol=5e-2, rtol=5e-2)


def test_vllm_seeds(vllm_engine, tok):
    prompts = prompts_for(tok)
    params = SamplingParams(n=4, max_new_tokens=10, seed=7)
    first = [[g.token_ids for g in gs] for gs in vllm_engine.generate(prompts, params)]
    assert [[g.token_ids for g in gs] for gs in vllm_engine.generate(prompts, params)] == first
    other = SamplingParams(n=4, max_new_tokens=10, seed=8)
    assert [[g.token_ids for g in gs] for gs in vllm_engine.generate(prompts, other)] != first
    assert len({tuple(t) for t in first[0]}) > 1


def test_vllm_stop_string_keeps_the_completing_token(vllm_engine, tok):
    prompt = prompts_for(tok)[:1]
    free = vllm_engine.generate(prompt, SamplingParams(temperature=0.0, max_new_tokens=24))[0][0]
    pieces = [decode(tok, [t]) for t in free.token_ids]
    a = next((i for i in range(1, len(pieces) - 1) if pieces[i] and pieces[i + 1]
              and "\ufffd" not in pieces[i] + pieces[i + 1]
              and decode(tok, free.token_ids[i:i + 2]) == pieces[i] + pieces[i + 1]), None)
    if a is None:
        pytest.fail(f"no two clean adjacent tokens in the greedy sample {pieces}")
    stop = pieces[a][-1] + pieces[a + 1][0]
    end = next(j for j in range(1, len(pieces) + 1) if stop in decode(tok, free.token_ids[:j]))
    g = vllm_engine.generate(prompt, SamplingParams(temperature=0.0, max_new_tokens=24,
                                                    stop=(stop,)))[0][0]
    assert g.token_ids == free.token_ids[:end] and g.finish_reason == "stop" and stop in g.text


def test_vllm_update_weights_in_place(vllm_engine, gpu_model, tok):
    prompts = prompts_for(tok)
    params = SamplingParams(n=2, max_new_tokens=8, temperature=0.0)
    before = [[g.token_ids for g in gs] for gs in vllm_engine.generate(prompts, params)]
    zeroed = copy.deepcopy(gpu_model)
    with torch.no_grad():
        for p in zeroed.parameters():
            p.zero_()
    vllm_engine.update_weights(zeroed)  # all logits 0: greedy picks token 0, which is EOS
    for gens in vllm_engine.generate(prompts, params):
        for g in gens:
            assert g.token_ids == [tok.eos_token_id] and g.finish_reason == "stop"
            assert g.logprobs[0] == pytest.approx(-math.log(gpu_model.config.vocab_size), abs=1e-3)
    vllm_engine.update_weights(gpu_model)  # and back: the prefix cache must not serve stale KV
    assert [[g.token_ids for g in gs] for gs in vllm_engine.generate(prompts, params)] == before


def test_vllm_refuses_filtered_logprobs(vllm_engine, tok):
    with pytest.raises(UserError, match="top_k/top_p"):
        vllm_engine.generate(prompts_for(tok), SamplingParams(top_p=0.9))
