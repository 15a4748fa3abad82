"""Checkpoints are atomic and pruned; the sampler resumes exactly; the logger writes its sinks."""

import json
import random

import numpy as np
import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from calibrl.errors import UserError
from calibrl.training.checkpoint import (
    find_checkpoint,
    list_checkpoints,
    save_checkpoint,
    set_rng_state,
)
from calibrl.training.distributed import shard_bounds
from calibrl.training.metrics_log import MetricsLogger
from calibrl.training.prompt_sampler import PromptSampler


class _Tok:
    def save_pretrained(self, path):
        path.mkdir(parents=True, exist_ok=True)
        (path / "tokenizer_config.json").write_text("{}")


def _tiny_model():
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1)
    return Qwen2ForCausalLM(cfg)


def test_save_prune_and_find(tmp_path):
    model = _tiny_model()
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, model=model, tokenizer=_Tok(),
                        trainer_state={"data": {"epoch": 0, "position": step}}, keep_last=2)
    assert [c.step for c in list_checkpoints(tmp_path)] == [2, 3]
    latest = find_checkpoint("auto", tmp_path)
    assert latest.step == 3 and latest.load_state()["data"]["position"] == 3
    reloaded = Qwen2ForCausalLM.from_pretrained(latest.model_dir)
    for a, b in zip(model.parameters(), reloaded.parameters(), strict=True):
        assert torch.equal(a, b)


def test_half_written_checkpoint_is_ignored_and_cleaned(tmp_path):
    model = _tiny_model()
    save_checkpoint(tmp_path, 1, model=model, tokenizer=_Tok(), trainer_state={}, keep_last=3)
    (tmp_path / ".tmp-checkpoint-000002" / "model").mkdir(parents=True)  # killed mid-write
    (tmp_path / "checkpoint-000003").mkdir()  # renamed dir without its info file: not complete
    assert find_checkpoint("auto", tmp_path).step == 1
    save_checkpoint(tmp_path, 2, model=model, tokenizer=_Tok(), trainer_state={}, keep_last=3)
    assert not (tmp_path / ".tmp-checkpoint-000002").exists()
    assert find_checkpoint("auto", tmp_path).step == 2


def test_resume_path_errors(tmp_path):
    assert find_checkpoint("auto", tmp_path) is None
    with pytest.raises(UserError, match="not a complete calibrl checkpoint"):
        find_checkpoint(str(tmp_path / "checkpoint-000009"), tmp_path)


def test_rng_states_round_trip(tmp_path):
    model = _tiny_model()
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    ckpt = save_checkpoint(tmp_path, 1, model=model, tokenizer=_Tok(), trainer_state={},
                           keep_last=1)
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    set_rng_state(ckpt.load_state()["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_sampler_resumes_exactly_and_covers_epochs():
    a = PromptSampler(size=10, seed=3)
    first = a.next(7)
    b = PromptSampler(size=10, seed=3)
    b.load_state_dict(a.state_dict())
    assert a.next(9) == b.next(9)
    fresh = PromptSampler(size=10, seed=3)
    epoch0 = fresh.next(10)
    assert sorted(epoch0) == list(range(10)) and epoch0[:7] == first
    assert fresh.next(10) != epoch0  # a new permutation per epoch


def test_process_shares_split_a_step_and_must_divide_it():
    shares = [shard_bounds(6, rank, 3) for rank in range(3)]
    # in rank order, equal, and together the whole step
    assert [i for lo, hi in shares for i in range(lo, hi)] == list(range(6))
    assert len({hi - lo for lo, hi in shares}) == 1
    with pytest.raises(UserError, match="multiple of 4"):
        shard_bounds(6, 0, 4)


def test_logger_writes_jsonl_samples_and_tensorboard(tmp_path):
    log = MetricsLogger(tmp_path, tensorboard=True)
    log.log(1, {"reward/answer_mean": 0.5, "bad": float("nan")})
    log.histogram(1, "confidence", [0.1, 0.9, float("nan")])
    log.samples(1, [{"prompt": "p|q", "answer": "a\nb", "confidence": 0.5}])
    log.close()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [{"step": 1, "reward/answer_mean": 0.5, "bad": None}]
    assert json.loads((tmp_path / "samples.jsonl").read_text())["prompt"] == "p|q"
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))


def test_processes_that_each_see_only_themselves_are_refused(monkeypatch):
    from types import SimpleNamespace

    from accelerate.utils import DistributedType

    from calibrl.training.distributed import check_launch

    alone = SimpleNamespace(num_processes=1, distributed_type=DistributedType.NO)
    check_launch(alone)  # a plain single-process run
    monkeypatch.setenv("WORLD_SIZE", "2")  # what torchrun sets for each of 2 processes
    with pytest.raises(UserError, match="ACCELERATE_USE_CPU=1"):
        check_launch(alone)
    check_launch(SimpleNamespace(num_processes=2, distributed_type=DistributedType.MULTI_CPU))
