"""Numeric QA end to end on CPU at toy sizes: the documented command sequence through the CLI
(data, model init, sft, train in each mode, eval, probe), and each mode's training signal coming
from the numeric QA verifier (a scripted engine writes half right, half wrong answers)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from calibrl.cli.main import main
from calibrl.protocol.tags import (
    ANALYSIS_CLOSE,
    ANALYSIS_OPEN,
    ANSWER_CLOSE,
    ANSWER_OPEN,
    CONFIDENCE_CLOSE,
    CONFIDENCE_OPEN,
)
from calibrl.rollout.engine import Generation
from calibrl.settings import TrainSettings, load_settings
from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples
from calibrl.training.trainer import Trainer

# End-to-end trainings: `make test-slow` (and CI) run them.
pytestmark = pytest.mark.slow

QA = get_task("numeric_qa")
CONFIG = Path(__file__).resolve().parents[2] / "configs" / "numeric_qa_tiny.yaml"
MODES = ("two_turn", "rlcr", "rlvr")
TOY = ["optim.total_steps=1", "rollout.prompts_per_step=2", "rollout.num_generations_answer=2",
       "rollout.num_generations_confidence=2", "rollout.max_answer_tokens=8",
       "rollout.max_confidence_tokens=6", "optim.micro_batch_size=8", "checkpoint.every=1",
       "logging.tensorboard=false", "logging.samples_every=1"]


def run(argv: list[str]) -> None:
    """`calibrl <argv>`, failing the test on a non-zero exit."""
    try:
        main(argv)
    except SystemExit as ex:
        assert ex.code in (0, None), f"calibrl {' '.join(argv)} exited {ex.code}"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """Data, a tiny model fitted to numeric QA, and 2 SFT steps on it, made by the CLI."""
    root = tmp_path_factory.mktemp("qa")
    run(["data", "numeric-qa", "--n", "16", "--num-steps", "1..2", "--test-size", "4",
         "--prompt-style", "compact", "--out", str(root / "data")])
    run(["model", "init", "--task", "numeric_qa", "--out", str(root / "init"),
         "--hidden-size", "32", "--num-layers", "1", "--num-heads", "2", "--max-positions", "256"])
    run(["sft", "--data", str(root / "data/train.parquet"), "--exclude",
         str(root / "data/test.parquet"), "--model", str(root / "init"), "--out",
         str(root / "sft"), "--steps", "2", "--no-bf16", "--batch-tokens", "512"])
    return root


def test_cli_trains_each_mode_then_evaluates_and_probes(pipeline):
    root = pipeline
    for mode in MODES:
        run(["train", "--config", str(CONFIG), f"model.path={root / 'sft/model'}",
             f"data.train_path={root / 'data/train.parquet'}",
             f"data.eval_path={root / 'data/test.parquet'}", f"algorithm.mode={mode}",
             f"logging.output_dir={root / 'runs'}", f"logging.run_name={mode}", *TOY])
        rows = (root / "runs" / mode / "metrics.jsonl").read_text().splitlines()
        metrics = json.loads(rows[-1])
        assert len(rows) == 1 and metrics["answer/count"] == 4
        assert all(math.isfinite(v) for v in metrics.values() if isinstance(v, float))
        samples = [json.loads(line) for line in
                   (root / "runs" / mode / "samples.jsonl").read_text().splitlines()]
        assert samples and all(" have now?" in json.dumps(s) for s in samples)
    run(["eval", "--model", str(root / "runs/two_turn/final-model"), "--data",
         str(root / "data/test.parquet"), "--mode", "two_turn", "--out", str(root / "eval"),
         "--max-answer-tokens", "8", "--max-confidence-tokens", "6"])
    saved = json.loads((root / "eval/metrics.json").read_text())
    test = load_examples(root / "data/test.parquet")
    assert saved["count"] == len(test) == 4
    predictions = [json.loads(line)
                   for line in (root / "eval/predictions.jsonl").read_text().splitlines()]
    groups = {QA.difficulty(e.ground_truth) for e in test}
    assert {p["group"] for p in predictions} == set(saved["by_group"]) == groups
    assert groups <= {"1 step", "2 steps"}
    run(["probe", "--model", str(root / "sft/model"), "--data", str(root / "data/test.parquet"),
         "--out", str(root / "probe"), "--limit", "1", "--samples", "1", "--points", "0,1",
         "--max-answer-tokens", "4", "--trace-max-tokens", "8", "--no-progress"])
    assert (root / "probe" / "traces.jsonl").read_text().strip()


class AnswerKeyEngine:
    """Writes `<answer>N</answer>` for each prompt's question: the right N for even samples, N+1
    for odd ones; followed by a confidence where turn 1 does not stop at the answer."""

    def __init__(self, tokenizer, answers: dict[str, str]):
        self.tokenizer, self.answers = tokenizer, answers

    def _answer(self, prompt_ids: list[int]) -> str:
        text = self.tokenizer.decode(prompt_ids)
        return next(a for q, a in self.answers.items() if q in text)

    def generate(self, prompts, params):
        out, rng = [], random.Random(len(prompts))
        for prompt in prompts:
            right, gens = self._answer(prompt), []
            for k in range(params.n):
                given = right if k % 2 == 0 else int(right) + 1
                body = f"{ANSWER_OPEN}{given}{ANSWER_CLOSE}"
                if ANSWER_CLOSE not in params.stop:  # rlcr turn 1, two-turn turn 2
                    body += (f"\n{ANALYSIS_OPEN}ok{ANALYSIS_CLOSE}\n{CONFIDENCE_OPEN}"
                             f"{rng.choice([0.2, 0.8])}{CONFIDENCE_CLOSE}")
                ids = self.tokenizer(body, add_special_tokens=False)["input_ids"]
                gens.append(Generation(ids, self.tokenizer.decode(ids), [-1.0] * len(ids),
                                       "stop"))
            out.append(gens)
        return out

    def update_weights(self, model):
        pass


class NullLogger:
    def log(self, *args, **kwargs):
        pass

    histogram = samples = close = log


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_is_rewarded_by_the_numeric_verifier(pipeline, tmp_path, mode):
    root = pipeline
    train = load_examples(root / "data/train.parquet")
    cfg = load_settings(TrainSettings, CONFIG, [
        f"model.path={root / 'init'}", f"data.train_path={root / 'data/train.parquet'}",
        f"algorithm.mode={mode}", f"logging.output_dir={tmp_path}", "logging.run_name=r", *TOY])
    trainer = Trainer(cfg)
    trainer.engine = AnswerKeyEngine(trainer.tokenizer, {
        e.ground_truth["question"]: e.ground_truth["answer"] for e in train})
    trainer.logger = NullLogger()  # train_step alone: train() opens the logger
    metrics = trainer.train_step()
    assert metrics["answer/accuracy"] == pytest.approx(0.5)  # exactly the even samples
    assert metrics["train/grad_norm"] > 0  # right and wrong answers: non-zero advantages
