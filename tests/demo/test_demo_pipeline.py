"""The demo at toy size: every stage runs and every artefact exists and parses."""

import json
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from calibrl.demo import pipeline
from calibrl.demo.pipeline import load_demo_settings, run_demo, stage_data_and_rewards
from calibrl.errors import Stopped
from calibrl.tasks.files import load_examples
from calibrl.tasks.mix import difficulty_of

# The recipe at a size that runs in seconds.
TOY = ["data.n_problems=40", "data.test_size=8", "data.max_number=12", "data.sft_problems=40",
       "sft.steps=3", "model.hidden_size=32", "model.num_layers=1", "model.num_heads=2",
       "eval.max_examples=8", "eval.samples=1", "eval.max_answer_tokens=8",
       "eval.max_confidence_tokens=6", "rl.optim.total_steps=2", "rl.rollout.prompts_per_step=2",
       "rl.rollout.num_generations_answer=2", "rl.rollout.num_generations_confidence=2",
       "rl.rollout.max_answer_tokens=8", "rl.rollout.max_confidence_tokens=6",
       "rl.optim.mixed_precision=no", "probe.limit=2", "probe.samples=4", "calibrate.steps=3",
       "calibrate.prompts=4", "calibrate.answers_per_prompt=2", "calibrate.batch_size=4",
       "calibrate.answer_batch_size=2", "calibrate.max_answer_tokens=8",
       "calibrate.max_confidence_tokens=6"]


def test_data_and_reward_stage(tmp_path: Path):
    settings = load_demo_settings(overrides=[
        f"out_dir={tmp_path}", "data.n_problems=40", "data.test_size=10", "data.max_number=12",
        "data.sft_size_weights=[1.0, 1.0, 2.0]", "data.sft_problems=60"])
    kinds = stage_data_and_rewards(settings, Console(file=open("/dev/null", "w")))
    train = load_examples(tmp_path / "data/train.parquet")
    assert len(train) == 30
    sft = load_examples(tmp_path / "data/sft.parquet")
    assert Counter(difficulty_of(e) for e in sft) == {"2 numbers": 15, "3 numbers": 15,
                                                       "4 numbers": 30}
    assert {e.messages[0]["content"] for e in sft} <= {e.messages[0]["content"] for e in train}
    assert len(load_examples(tmp_path / "data/test.parquet")) == 10
    assert kinds["reference"][1.0] == 10  # every reference solution verifies
    assert kinds["no answer tag"][0] == 10
    assert kinds["corrupted"][0.1] >= 8  # an operator swap rarely keeps the value


def test_toy_demo_end_to_end(tmp_path: Path):
    report = run_demo(load_demo_settings(overrides=[*TOY, f"out_dir={tmp_path}"]))
    text = report.read_text()
    assert "before RL (SFT)" in text and "after two-turn RLCR" in text
    assert "after the confidence warm-up" in text and "readout of the state" in text
    for name in ("eval-before", "eval-calibrated", "eval-after"):
        metrics = json.loads((tmp_path / name / "metrics.json").read_text())
        assert metrics["count"] == 8 and metrics["mode"] == "two_turn"
        assert "readout" in metrics["baselines"]
        assert (tmp_path / name / "predictions.jsonl").read_text().count("\n") == 8
    assert (tmp_path / "sft/model/config.json").is_file()
    assert (tmp_path / "calibrate/model/config.json").is_file()
    graded = (tmp_path / "calibrate/graded.jsonl").read_text().splitlines()
    assert len(graded) == 8  # 4 RL prompts x 2 answers, none from the test split
    first_rl = {e.index for e in load_examples(tmp_path / "data/rl.parquet")[:4]}
    assert {json.loads(g)["index"] for g in graded} == first_rl
    assert (tmp_path / "rl/final-model/config.json").is_file()
    assert len((tmp_path / "rl/metrics.jsonl").read_text().splitlines()) == 2
    assert (tmp_path / "training_curves.png").stat().st_size > 0
    assert json.loads((tmp_path / "timings.json").read_text())["two-turn RLCR"] > 0
    assert json.loads((tmp_path / "timings.json").read_text())["confidence warm-up"] > 0
    for image in [line.split("(")[1].rstrip(")") for line in text.splitlines()
                  if line.startswith("![")]:
        assert (tmp_path / image).is_file(), image


def test_a_demo_stopped_by_a_signal_says_to_run_it_again(tmp_path: Path, monkeypatch):
    def stopped(settings):
        raise Stopped("SIGTERM", 3)

    monkeypatch.setattr(pipeline, "stage_sft", stopped)
    with pytest.raises(Stopped) as info:
        run_demo(load_demo_settings(overrides=[*TOY, f"out_dir={tmp_path}"]))
    assert "run it again" in str(info.value) and "--resume" in str(info.value)
    assert info.value.exit_code == 75
