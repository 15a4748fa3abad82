"""RL steps of the two-turn mode on the real model: every weight, then a LoRA adapter on all of
its linear layers, resumed from a checkpoint to the same weights as a run that never stopped.

As it comes the model never writes the answer tags, so the short-answer grading would score
every answer 0 and no answer would carry an advantage. The questions here are graded by a coin
instead (right iff the bytes of the reply sum to an even number): real replies, varied rewards,
so the update has a gradient. The confidence replies parse to no value and all score the same;
their rows carry no advantage and are left out of the update.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pytest
import torch
from safetensors.torch import load_file

from calibrl.settings import TrainSettings, load_settings
from calibrl.tasks import register_task
from calibrl.tasks.short_answer.task import ShortAnswerTask
from calibrl.training.trainer import Trainer
from real_model.questions import write_questions

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class CoinGradedQuestions(ShortAnswerTask):
    name: str = "test_coin_questions"
    aliases = ()

    def check(self, answer_text, ground_truth):
        return sum(answer_text.encode()) % 2 == 0


try:
    register_task(CoinGradedQuestions())
except ValueError:  # registered already under another import of this module
    pass


def _config(out, model_dir, *extra) -> TrainSettings:
    data = write_questions(out / "train.parquet", data_source="test_coin_questions",
                           split="train")
    # Tiny on purpose: two prompts of four answers with two confidences each, short replies.
    return load_settings(TrainSettings, None, [
        f"model.path={model_dir}", f"data.train_path={data}", "algorithm.mode=two_turn",
        f"logging.output_dir={out}", "logging.run_name=run", "logging.tensorboard=false",
        "optim.total_steps=1", "optim.lr=1e-4", "optim.micro_batch_size=4",
        "optim.scheduler=constant", "rollout.prompts_per_step=2",
        "rollout.num_generations_answer=4", "rollout.num_generations_confidence=2",
        "rollout.max_answer_tokens=16", "rollout.max_confidence_tokens=8", *extra])


def _metrics(run) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_one_step_trains_every_weight_with_a_finite_loss(tmp_path, smollm2_dir):
    trainer = Trainer(_config(tmp_path, smollm2_dir))
    final = trainer.train()
    [metrics] = _metrics(tmp_path / "run")
    assert metrics["answer/reward_std"] > 0  # the coin split the answers
    assert metrics["train/rows_trained"] > 0
    for key in ("train/loss", "train/answer/pg_loss", "train/grad_norm"):
        assert math.isfinite(metrics[key]), key
    assert metrics["train/grad_norm"] > 0
    initial = load_file(str(smollm2_dir / "model.safetensors"))
    trained = load_file(str(final / "model.safetensors"))
    assert trained.keys() == initial.keys()
    unmoved = [k for k in initial if torch.equal(initial[k], trained[k])]
    assert not unmoved  # every weight trains


def test_a_lora_run_resumed_from_its_checkpoint_ends_with_the_same_weights(tmp_path,
                                                                          smollm2_dir):
    pytest.importorskip("peft")
    lora = ("model.lora.r=4", "model.lora.alpha=8", "optim.lr=1e-3", "checkpoint.every=1")
    straight = Trainer(_config(tmp_path / "a", smollm2_dir, *lora, "optim.total_steps=2"))
    trained = [n for n, p in straight._unwrapped().named_parameters() if p.requires_grad]
    assert trained and all("lora_" in n for n in trained)
    expected = load_file(str(straight.train() / "model.safetensors"))
    del straight

    Trainer(_config(tmp_path / "b", smollm2_dir, *lora)).train()
    (tmp_path / "b/run/final-model").rename(tmp_path / "b/final-of-step-1")
    resumed = Trainer(_config(tmp_path / "b", smollm2_dir, *lora, "optim.total_steps=2",
                              "checkpoint.resume=auto"))
    assert resumed.resume_from is not None and resumed.resume_from.step == 1
    assert (resumed.resume_from.path / "model/adapter_model.safetensors").is_file()
    got = load_file(str(resumed.train() / "model.safetensors"))
    del resumed

    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(got[key], value), key
    after_one = load_file(str(tmp_path / "b/final-of-step-1/model.safetensors"))
    assert any(not torch.equal(after_one[k], expected[k]) for k in expected)  # step 2 moved
    # Merged into the base, the adapter moved every block's linear layers and nothing else.
    initial = load_file(str(smollm2_dir / "model.safetensors"))
    moved = {k for k in initial if not torch.equal(initial[k], expected[k])}
    assert moved == {k for k in initial if k.endswith("_proj.weight")}

    def step_two(run):
        [row] = [m for m in _metrics(run) if m["step"] == 2]
        return {k: v for k, v in row.items() if not k.startswith("time/")}

    assert step_two(tmp_path / "b/run") == step_two(tmp_path / "a/run")
