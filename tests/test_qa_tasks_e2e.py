"""Math, short answer and multiple choice end to end on CPU with the session's tiny model: rows
in a public data set's shape converted by `calibrl data`, two-turn RLCR for a few steps with
`calibrl train`, then `calibrl eval` of the trained model; each task's verifier giving the
training signal (a scripted engine writes half right, half wrong answers); and `calibrl eval`
over a math and a short-answer data set at once, each reported and pooled."""

from __future__ import annotations

import json
import math

import pytest
import torch

from calibrl.cli.main import main
from calibrl.models.loading import load_policy
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

pytest.importorskip("math_verify")

# Rows as the public data sets write them; a file may mix the shapes a converter reads.
ROWS = {
    "math": [  # GSM8K and MATH (with a level) alternating
        {"question": f"Sam has {i} apples and buys {i + 2} more. How many does he have?",
         "answer": f"He has {i} + {i + 2}.\n#### {2 * i + 2}"} if i % 2 else
        {"problem": f"What is ${i} \\times 3$?", "solution": f"It is $\\boxed{{{3 * i}}}$.",
         "level": f"Level {1 + i % 4}", "type": "Prealgebra"}
        for i in range(8)],
    "short_answer": [  # HotpotQA
        {"question": f"Which river runs through town {i}?", "answer": f"River {i}",
         "level": ("easy", "hard")[i % 2]} for i in range(8)],
    "multiple_choice": [  # MMLU
        {"question": f"Which number comes after {i}?", "choices": [str(i + 1), str(i + 2),
                                                                  str(i + 3)],
         "answer": 0} for i in range(8)],
}
COMMANDS = {"math": "math", "short_answer": "short-answer", "multiple_choice": "multiple-choice"}
TOY = ["algorithm.mode=two_turn", "optim.total_steps=2", "rollout.prompts_per_step=2",
       "rollout.num_generations_answer=2", "rollout.num_generations_confidence=2",
       "rollout.max_answer_tokens=8", "rollout.max_confidence_tokens=6",
       "optim.micro_batch_size=8", "checkpoint.every=1", "logging.tensorboard=false",
       "logging.samples_every=1", "eval.every_steps=1", "eval.max_examples=2"]
SHORT_EVAL = ["--mode", "two_turn", "--max-answer-tokens", "8", "--max-confidence-tokens", "6",
              "bootstrap=20"]


def run(argv: list[str]) -> None:
    """`calibrl <argv>`, failing the test on a non-zero exit."""
    try:
        main(argv)
    except SystemExit as ex:
        assert ex.code in (0, None), f"calibrl {' '.join(argv)} exited {ex.code}"


def floats(metrics: dict) -> list[float]:
    return [v for v in metrics.values() if isinstance(v, float)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Each task's rows converted by `calibrl data` (compact prompts), 4 test rows each."""
    root = tmp_path_factory.mktemp("qa-tasks")
    for name, rows in ROWS.items():
        source = root / f"{name}.jsonl"
        source.write_text("".join(json.dumps(row) + "\n" for row in rows))
        run(["data", COMMANDS[name], "--from", str(source), "--test-size", "4",
             "--prompt-style", "compact", "--out", str(root / name)])
    return root


@pytest.mark.parametrize("name", ROWS)
def test_train_two_turn_then_eval(name, data, tiny_model_dir, tmp_path):
    task, folder = get_task(name), data / name
    run(["train", f"model.path={tiny_model_dir}", f"data.train_path={folder / 'train.parquet'}",
         f"data.eval_path={folder / 'test.parquet'}", f"logging.output_dir={tmp_path}",
         "logging.run_name=run", *TOY])
    run_dir = tmp_path / "run"
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "answer/count" in r]
    assert len(steps) == 2 and all(r["answer/count"] == 4 for r in steps)
    assert all(math.isfinite(v) for r in records for v in floats(r))
    assert any("eval/accuracy" in r for r in records)  # the held-out evaluation ran
    samples = (run_dir / "samples.jsonl").read_text()
    questions = [ex.ground_truth["question"] for ex in load_examples(folder / "train.parquet")]
    assert any(json.dumps(q)[1:-1] in samples for q in questions)  # this task's prompts
    # The last checkpoint loads, and holds the weights final-model was saved with.
    checkpoint, _ = load_policy(str(run_dir / "checkpoint-000002" / "model"))
    final, _ = load_policy(str(run_dir / "final-model"))
    for (key, a), b in zip(checkpoint.state_dict().items(), final.state_dict().values(),
                           strict=True):
        assert torch.equal(a, b), key

    out = tmp_path / "eval"
    run(["eval", "--model", str(run_dir / "final-model"), "--data",
         str(folder / "test.parquet"), "--out", str(out), *SHORT_EVAL])
    saved = json.loads((out / "metrics.json").read_text())
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text()
                   .splitlines()]
    test = load_examples(folder / "test.parquet")
    assert saved["count"] == len(predictions) == len(test) == 4
    assert 0.0 <= saved["accuracy"] <= 1.0
    # Two steps from a random model rarely write a confidence that parses: with fewer than half
    # parsed, ECE and Brier are not available and the reason is saved beside them.
    if saved.get("calibration_unavailable"):
        assert saved["ece"] is None and saved["unparsable_confidence_rate"] > 0.5
    else:
        for key in ("ece", "brier"):
            assert math.isfinite(saved[key]) and 0.0 <= saved[key] <= 1.0, key
    groups = {task.difficulty(ex.ground_truth) for ex in test}
    assert {p["group"] for p in predictions} == set(saved["by_group"]) == groups


def test_eval_of_a_math_and_a_short_answer_set_reports_each_and_pooled(data, tiny_model_dir,
                                                                        tmp_path, capsys):
    out = tmp_path / "cross"
    run(["eval", "--model", str(tiny_model_dir), "--data", str(data / "math/test.parquet"),
         "--data", str(data / "short_answer/test.parquet"), "--out", str(out), *SHORT_EVAL])
    printed = capsys.readouterr().out
    labels = {p.name for p in out.iterdir()}
    assert len(labels) == 3 and "pooled" in labels  # one folder per data set, and pooled
    each = {label: json.loads((out / label / "metrics.json").read_text()) for label in labels}
    (math_label,) = [lb for lb in labels if lb != "pooled" and
                     all(g.startswith(("Level", "all")) for g in each[lb]["by_group"])]
    (qa_label,) = labels - {"pooled", math_label}
    assert set(each[qa_label]["by_group"]) == {"easy", "hard"}
    pooled = each["pooled"]
    assert pooled["count"] == each[math_label]["count"] + each[qa_label]["count"] == 8
    assert pooled["accuracy"] == pytest.approx(
        (each[math_label]["accuracy"] * 4 + each[qa_label]["accuracy"] * 4) / 8)
    assert set(pooled["by_group"]) == {f"{label}: {group}" for label in (math_label, qa_label)
                                       for group in each[label]["by_group"]}
    for label in labels:  # a table row for each data set and the pooled one
        assert f"| cross/{label} |" in printed


# --- the training signal comes from each task's verifier ----------------------------------------

def right_and_wrong(name: str, truth: dict) -> tuple[str, str]:
    """A right and a wrong answer to one problem of task `name`."""
    if name == "math":
        return truth["answer"], str(int(truth["answer"]) + 1)
    if name == "short_answer":
        return truth["answers"][0], "Nowhere"
    return truth["answer"], next(c for c in "ABC" if c != truth["answer"])


class AnswerKeyEngine:
    """Writes `<answer>X</answer>` for each prompt's question: right for even samples, wrong for
    odd ones; a confidence follows where turn 1 does not stop at the answer."""

    def __init__(self, tokenizer, answers: dict[str, tuple[str, str]]):
        self.tokenizer, self.answers = tokenizer, answers

    def generate(self, prompts, params):
        out = []
        for prompt in prompts:
            text = self.tokenizer.decode(prompt)
            pair = next(a for q, a in self.answers.items() if q in text)
            gens = []
            for k in range(params.n):
                body = f"{ANSWER_OPEN}{pair[k % 2]}{ANSWER_CLOSE}"
                if ANSWER_CLOSE not in params.stop:
                    body += (f"\n{ANALYSIS_OPEN}ok{ANALYSIS_CLOSE}\n{CONFIDENCE_OPEN}0.5"
                             f"{CONFIDENCE_CLOSE}")
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


@pytest.mark.parametrize("name", ROWS)
def test_two_turn_training_is_rewarded_by_the_tasks_verifier(name, data, tiny_model_dir,
                                                             tmp_path):
    train = data / name / "train.parquet"
    cfg = load_settings(TrainSettings, None, [
        f"model.path={tiny_model_dir}", f"data.train_path={train}",
        f"logging.output_dir={tmp_path}", "logging.run_name=r", *TOY])
    trainer = Trainer(cfg)
    trainer.engine = AnswerKeyEngine(trainer.tokenizer, {
        ex.ground_truth["question"]: right_and_wrong(name, ex.ground_truth)
        for ex in load_examples(train)})
    trainer.logger = NullLogger()  # train_step alone: train() opens the logger
    metrics = trainer.train_step()
    assert metrics["answer/accuracy"] == pytest.approx(0.5)  # exactly the even samples
    assert metrics["train/grad_norm"] > 0  # right and wrong answers: non-zero advantages
