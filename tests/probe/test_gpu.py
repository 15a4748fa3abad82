"""GPU-only probe checks: the cached sampler on CUDA and the probe through vLLM.

Marked `gpu` (deselected by default); each skips cleanly without CUDA or vLLM. Run with
`.venv-gpu/bin/python -m pytest -m gpu tests/probe` on a GPU machine (see scripts/gpu_tests.sh).
"""

from __future__ import annotations

import pytest
import torch

from calibrl.probe.runner import ROWS_FILE, iter_rows, run_probe
from calibrl.probe.sampler import CachedSampler, EngineSampler, ProbeJob
from calibrl.rollout.engine import SamplingParams
from calibrl.rollout.hf_engine import HFEngine
from calibrl.settings.probe import ProbeSection

pytestmark = pytest.mark.gpu

CONFIG = ProbeSection(samples=4, max_answer_tokens=6, trace_max_tokens=16, limit=2)


@pytest.fixture(scope="module")
def cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    return torch.device("cuda")


@pytest.fixture(scope="module")
def gpu_model(cuda, model):
    import copy

    return copy.deepcopy(model).to(cuda)


def test_cached_sampler_on_cuda_is_batch_invariant(gpu_model, tokenizer):
    engine = HFEngine(gpu_model, tokenizer)
    prefix = tokenizer.encode("<|im_start|>assistant\n<think>\n1 + 2 = 3\n3 * 3 = 9\n")
    jobs = [ProbeJob(1, prefix, [3, 8, len(prefix)]), ProbeJob(2, prefix[:9], [9])]
    suffix = tokenizer.encode("</think>\n<answer>")
    params = SamplingParams(n=5, max_new_tokens=8, seed=3, stop=("</answer>",))
    a = CachedSampler(engine, max_rows=3).sample(jobs, suffix, params)
    b = CachedSampler(engine, max_rows=1000).sample(jobs, suffix, params)
    assert [[[g.token_ids for g in c] for c in j] for j in a] == \
        [[[g.token_ids for g in c] for c in j] for j in b]


def test_probe_through_vllm(cuda, tokenizer, examples, tmp_path):
    pytest.importorskip("vllm")
    from calibrl.models.tiny import build_tiny_model
    from calibrl.rollout.vllm_engine import VLLMEngine

    # head dim 64: a size every vLLM attention backend supports.
    model = build_tiny_model(tokenizer, hidden_size=128, num_layers=1, num_heads=2)
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    engine = VLLMEngine(str(tmp_path / "m"), tokenizer, dtype="float32",
                        gpu_memory_utilization=0.2, allow_filtered_logprobs=True,
                        llm_kwargs={"enforce_eager": True})
    summary = run_probe(EngineSampler(engine), tokenizer, examples, CONFIG, tmp_path / "out",
                        trace_engine=engine, progress=False)
    rows = list(iter_rows(tmp_path / "out" / ROWS_FILE))
    assert summary["traces"] == 2 and len(rows) == 2
    for row in rows:
        assert all(0 <= p["correct"] <= CONFIG.samples for p in row["points"])
