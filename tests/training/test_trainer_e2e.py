"""End-to-end training on a tiny model, CPU, a few steps per mode.

Two engines: the real transformers engine on a random model (with a coin-flip task, so random
text still gets varied rewards and the weights must move), and a scripted engine that writes
well-formed answers and confidences, so both sample types carry non-zero advantages.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from calibrl.data import TaskExample
from calibrl.rollout.engine import Generation
from calibrl.settings import TrainSettings, load_settings
from calibrl.tasks.countdown import COUNTDOWN
from calibrl.tasks.files import write_examples
from calibrl.training.trainer import Trainer
from training.coin_task import COIN

CoinTask = type(COIN)


def _data(tmp_path: Path, source: str, n: int = 8) -> Path:
    rng = random.Random(0)
    examples = []
    for i in range(n):
        gt = {"target": rng.randint(1, 20), "numbers": [rng.randint(1, 9) for _ in range(3)]}
        task = CoinTask() if source == "test_coin" else COUNTDOWN
        examples.append(TaskExample(source, task.make_prompt(gt), gt, i, "train"))
    return write_examples(tmp_path / "train.parquet", examples)


def _config(tmp_path, model_dir, data, mode, *extra):
    return load_settings(TrainSettings, None, [
        f"model.path={model_dir}", f"data.train_path={data}", f"algorithm.mode={mode}",
        f"logging.output_dir={tmp_path}", "logging.run_name=run", "logging.samples_every=1",
        "optim.total_steps=2", "optim.lr=1e-2", "optim.micro_batch_size=4",
        "optim.scheduler=constant", "rollout.prompts_per_step=2",
        "rollout.num_generations_answer=3", "rollout.num_generations_confidence=2",
        "rollout.max_answer_tokens=8", "rollout.max_confidence_tokens=6", "checkpoint.every=1",
        *extra])


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _all_finite(metrics: dict) -> bool:
    return all(math.isfinite(v) for v in metrics.values() if isinstance(v, float))


@pytest.mark.parametrize("mode", ["two_turn", "rlcr", "rlvr"])
def test_each_mode_trains_with_the_real_engine(tmp_path, tiny_model_dir, mode):
    # Every row trains, so each sample type reports its metrics even when its rewards tie.
    cfg = _config(tmp_path, tiny_model_dir, _data(tmp_path, "test_coin"), mode,
                  "optim.skip_rows_without_gradient=false")
    trainer = Trainer(cfg)
    before = _weights(trainer._unwrapped())
    final = trainer.train()
    after = _weights(trainer._unwrapped())
    assert any(not torch.equal(before[k], after[k]) for k in before), "weights did not change"
    rows = (tmp_path / "run/metrics.jsonl").read_text().splitlines()
    assert len(rows) == 2
    import json

    metrics = json.loads(rows[-1])
    assert all(v is not None for v in metrics.values())
    assert "train/answer/pg_loss" in metrics
    assert ("train/confidence/pg_loss" in metrics) == (mode == "two_turn")
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(final)  # final model loads like any HF model


class ScriptedEngine:
    """Writes well-formed Countdown answers (half right) and confidences (varied)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.calls = 0

    def generate(self, prompts, params):
        rng = random.Random(self.calls)
        self.calls += 1
        out = []
        for _ in prompts:
            gens = []
            for _ in range(params.n):
                if "</confidence>" in params.stop:  # two_turn: turn 2
                    body = f"<analysis>ok</analysis>\n<confidence>{rng.choice([0.1, 0.5, 0.9])}</confidence>"
                else:
                    body = f"<think>\n1 + 2 = 3\n</think>\n<answer>{rng.choice(['1 + 2', '1 * 2'])}</answer>"
                ids = self.tokenizer(body, add_special_tokens=False)["input_ids"]
                gens.append(Generation(ids, self.tokenizer.decode(ids, skip_special_tokens=True),
                                       [-1.0] * len(ids), "stop"))
            out.append(gens)
        return out

    def update_weights(self, model):
        pass


def test_two_turn_gradients_reach_both_sample_types(tmp_path, tiny_model_dir):
    data = tmp_path / "cd.parquet"
    gt = {"target": 3, "numbers": [1, 2]}
    write_examples(data, [TaskExample("countdown", COUNTDOWN.make_prompt(gt), gt, i, "train")
                          for i in range(4)])
    cfg = _config(tmp_path, tiny_model_dir, data, "two_turn", "optim.total_steps=1")
    trainer = Trainer(cfg)
    trainer.engine = ScriptedEngine(trainer.tokenizer)
    trainer.logger = _NullLogger()
    metrics = trainer.train_step()
    assert 0 < metrics["answer/reward_mean"] < 1
    assert metrics["confidence/reward_mean"] > 0  # every confidence parsed
    assert metrics["train/answer/pg_loss"] != 0 or metrics["train/confidence/pg_loss"] != 0
    assert _all_finite(metrics)
    assert metrics["train/grad_norm"] > 0


class _NullLogger:
    def log(self, *a, **k):
        pass

    histogram = samples = close = log


class _Killed(Exception):
    pass


def test_killed_run_resumes_to_identical_weights(tmp_path, tiny_model_dir):
    data = _data(tmp_path, "test_coin")
    straight = Trainer(_config(tmp_path / "a", tiny_model_dir, data, "two_turn",
                               "optim.total_steps=4", "checkpoint.every=2"))
    straight.train()
    expected = _weights(straight._unwrapped())

    killed = Trainer(_config(tmp_path / "b", tiny_model_dir, data, "two_turn",
                             "optim.total_steps=4", "checkpoint.every=2"))
    real_step = killed.train_step

    def dying_step():
        if killed.step == 3:  # after checkpoint 2, in the middle of step 4's work
            raise _Killed
        return real_step()

    killed.train_step = dying_step
    with pytest.raises(_Killed):
        killed.train()
    resumed = Trainer(_config(tmp_path / "b", tiny_model_dir, data, "two_turn",
                              "optim.total_steps=4", "checkpoint.every=2",
                              "checkpoint.resume=auto"))
    final = resumed.train()
    got = load_file(str(final / "model.safetensors"))
    for key, value in expected.items():
        if key in got:
            assert torch.equal(got[key], value), key
    initial = load_file(str(tiny_model_dir / "model.safetensors"))
    assert any(not torch.equal(initial[k], expected[k]) for k in initial)  # not vacuous
