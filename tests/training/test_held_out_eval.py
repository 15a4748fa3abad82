"""Held-out evaluation during training: `data.eval_path` + `eval.*`, logged as `eval/*`."""

from __future__ import annotations

import json

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from calibrl.cli.main import main
from calibrl.data import TaskExample
from calibrl.errors import UserError
from calibrl.evaluation.during_training import eval_section, held_out_evaluator
from calibrl.rollout.engine import Generation
from calibrl.settings import TrainSettings, load_settings
from calibrl.tasks.countdown import COUNTDOWN
from calibrl.tasks.files import write_examples
from calibrl.training.trainer import Trainer
from training.test_trainer_e2e import _config, _data


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_train_logs_held_out_metrics_every_n_steps_and_at_the_end(tmp_path, tiny_model_dir):
    train = _data(tmp_path, "test_coin")
    held_out = _data(tmp_path / "held_out", "test_coin", n=6)
    main(["train", f"model.path={tiny_model_dir}", f"data.train_path={train}",
          f"data.eval_path={held_out}", "data.task_modules=[training.coin_task]",
          f"logging.output_dir={tmp_path}", "logging.run_name=run", "optim.total_steps=3",
          "eval.every_steps=2", "eval.max_examples=4", "rollout.prompts_per_step=2",
          "rollout.num_generations_answer=2", "rollout.max_answer_tokens=8",
          "rollout.max_confidence_tokens=6", "checkpoint.every=10"])
    rows = {row["step"]: row for row in _rows(tmp_path / "run")}
    assert "eval/accuracy" not in rows[1]
    for step in (2, 3):  # every 2 steps, and the last one
        for key in ("eval/accuracy", "eval/unparsable_confidence_rate", "time/eval_s"):
            assert isinstance(rows[step][key], float), (step, key)
        assert 0 <= rows[step]["eval/accuracy"] <= 1
        # ECE and Brier are logged when at least half of the confidences parsed (else they are
        # not available, `calibrl.evaluation.metrics.calibration_unavailable`).
        calibrated = rows[step]["eval/unparsable_confidence_rate"] <= 0.5
        assert ("eval/ece" in rows[step]) == ("eval/brier" in rows[step]) == calibrated
        assert not calibrated or 0 <= rows[step]["eval/brier"] <= 1
    events = EventAccumulator(str(tmp_path / "run/tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("eval/accuracy")] == [2, 3]


class _Recorder:
    """An evaluator that records its calls and returns fixed numbers."""

    def __init__(self, trainer_box):
        self.calls = []
        self.box = trainer_box

    def __call__(self, model, tokenizer, examples, engine):
        trainer = self.box[0]
        self.calls.append((trainer.step, len(examples), model is trainer._unwrapped(),
                           engine is trainer.engine, model.training))
        return {"accuracy": 0.25, "auroc": 0.75}


def test_the_evaluator_gets_the_live_model_and_its_numbers_are_logged(tmp_path, tiny_model_dir):
    held_out = _data(tmp_path / "held_out", "test_coin", n=6)
    cfg = _config(tmp_path, tiny_model_dir, _data(tmp_path, "test_coin"), "rlvr",
                  f"data.eval_path={held_out}", "eval.every_steps=1", "eval.max_examples=5",
                  "logging.log_every=100", "logging.tensorboard=false")
    box = []
    recorder = _Recorder(box)
    trainer = Trainer(cfg, evaluator=recorder)
    box.append(trainer)
    trainer.train()
    assert recorder.calls == [(1, 5, True, True, False), (2, 5, True, True, False)]
    rows = _rows(tmp_path / "run")  # logged although log_every skips these steps
    assert [(r["step"], r["eval/accuracy"], r["eval/auroc"]) for r in rows] == [
        (1, 0.25, 0.75), (2, 0.25, 0.75)]


def test_eval_path_without_an_evaluator_warns_and_empty_rows_are_refused(
        tmp_path, tiny_model_dir, capsys):
    train = _data(tmp_path, "test_coin")
    cfg = _config(tmp_path, tiny_model_dir, train, "rlvr", f"data.eval_path={train}")
    assert Trainer(cfg).held_out is None
    assert "warning: data.eval_path is set but the trainer was given no evaluator" in (
        capsys.readouterr().out)
    empty = write_examples(tmp_path / "empty.parquet", [])
    cfg = _config(tmp_path / "b", tiny_model_dir, train, "rlvr", f"data.eval_path={empty}")
    with pytest.raises(UserError, match="no rows"):
        Trainer(cfg, evaluator=lambda *a: {})


def test_a_missing_eval_file_is_one_line_exit_2(tmp_path, tiny_model_dir, capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", f"model.path={tiny_model_dir}",
              f"data.train_path={_data(tmp_path, 'test_coin')}",
              "data.task_modules=[training.coin_task]", f"data.eval_path={tmp_path}/no.parquet",
              f"logging.output_dir={tmp_path}/runs"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error:") and "no.parquet" in err


class _FixedAnswers:
    """Always answers `(1 + 2)` with confidence 0.9."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, prompts, params):
        confidence = "</confidence>" in params.stop
        text = ("<analysis>ok</analysis>\n<confidence>0.9</confidence>" if confidence
                else "<think>\n1 + 2 = 3\n</think>\n<answer>1 + 2</answer>")
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return [[Generation(ids, text, [-1.0] * len(ids), "stop")] * params.n for _ in prompts]

    def update_weights(self, model):
        pass


def test_the_evaluator_scores_like_calibrl_eval(tmp_path, tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    truths = [{"target": 3, "numbers": [1, 2]}, {"target": 2, "numbers": [1, 2]}] * 2
    examples = [TaskExample("countdown", COUNTDOWN.make_prompt(gt), gt, i, "test")
                for i, gt in enumerate(truths)]
    cfg = load_settings(TrainSettings, None, ["eval.samples=2", "eval.temperature=1"])
    metrics = held_out_evaluator(cfg)(None, tokenizer, examples, _FixedAnswers(tokenizer))
    assert metrics["accuracy"] == 0.5  # right for target 3 only
    assert metrics["brier"] == pytest.approx(0.5 * 0.1**2 + 0.5 * 0.9**2)
    assert metrics["ece"] == pytest.approx(0.4)
    assert metrics["unparsable_confidence_rate"] == 0.0


def test_eval_settings_follow_the_run():
    cfg = load_settings(TrainSettings, None, [
        "algorithm.mode=rlcr", "rollout.max_answer_tokens=77", "eval.temperature=0.5",
        "eval.samples=3", "seed=5"])
    section = eval_section(cfg)
    assert (section.mode, section.max_answer_tokens, section.temperature, section.samples,
            section.seed) == ("rlcr", 77, 0.5, 3, 5)


@pytest.mark.parametrize("overrides,expected", [
    (["eval.every_steps=0"], "config eval.every_steps"),
    (["eval.max_examples=0"], "config eval.max_examples"),
    (["eval.samples=2"], "repeats one greedy answer"),
    (["eval.every_step=3"], "did you mean 'eval.every_steps'"),
])
def test_bad_eval_settings_are_refused(overrides, expected):
    with pytest.raises(UserError, match=expected):
        load_settings(TrainSettings, None, overrides)
