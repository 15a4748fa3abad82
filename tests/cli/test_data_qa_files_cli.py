"""`calibrl data short-answer` and `calibrl data multiple-choice` on rows written locally in the
public data sets' field names, then `calibrl eval` of a tiny random model on each written test
split: it runs end to end and groups by the task's difficulty; bad input exits with code 2."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples
from cli_exit import run

LEVELS = ("easy", "medium", "hard")
HOTPOTQA = [{"id": f"h{i}", "question": f"Which town is number {i} on the list?",
             "answer": f"Town {i}", "type": "bridge", "level": LEVELS[i % 3]} for i in range(9)]
CSQA = [{"id": f"c{i}", "question": f"Where would you put object {i}?", "question_concept": "x",
         "choices": {"label": list("ABCDE"), "text": [f"place {i}-{k}" for k in range(5)]},
         "answerKey": "ABCDE"[i % 5]} for i in range(6)]
GPQA = [{"Question": f"Which value solves problem {i}?", "Correct Answer": f"{i}",
         "Incorrect Answer 1": f"{i + 1}", "Incorrect Answer 2": f"{i + 2}",
         "Incorrect Answer 3": f"{i + 3}",
         "Writer's Difficulty Estimate": ["Easy undergraduate level (or easier)",
                                          "Hard graduate level (could be a question on the "
                                          "hard graduate exam for PhD students)"][i % 2]}
        for i in range(4)]



def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def evaluate(tiny_model_dir, data, out):
    """`calibrl eval` with short turns; its predictions and metrics."""
    assert run(["eval", "--model", str(tiny_model_dir), "--data", str(data), "--out", str(out),
                "--max-answer-tokens", "6", "--max-confidence-tokens", "4"]) == 0
    predictions = [json.loads(line)
                   for line in (out / "predictions.jsonl").read_text().splitlines()]
    return predictions, json.loads((out / "metrics.json").read_text())


def test_short_answer_data_then_eval(tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "hotpot"
    assert run(["data", "short-answer", "--from", str(write_jsonl(tmp_path / "h.jsonl",
                HOTPOTQA)), "--test-size", "6", "--out", str(out)]) == 0
    assert "read 9 rows" in capsys.readouterr().out
    train, test = load_examples(out / "train.parquet"), load_examples(out / "test.parquet")
    assert (len(train), len(test)) == (3, 6)
    assert pq.read_schema(out / "test.parquet") == get_task("short_answer").arrow_schema()
    predictions, metrics = evaluate(tiny_model_dir, out / "test.parquet", tmp_path / "eval")
    assert metrics["count"] == len(predictions) == 6
    assert {p["group"] for p in predictions} == set(metrics["by_group"]) == set(LEVELS)
    assert 0.0 <= metrics["accuracy"] <= 1.0
    # token F1 beside accuracy: each answer's, their mean overall and per group, and printed
    f1 = [p["extra_scores"]["token_f1"] for p in predictions]
    assert metrics["extra_scores"]["token_f1"] == pytest.approx(sum(f1) / len(f1))
    for label, group in metrics["by_group"].items():
        mine = [p["extra_scores"]["token_f1"] for p in predictions if p["group"] == label]
        assert group["extra_scores"]["token_f1"] == pytest.approx(sum(mine) / len(mine))
    assert "| token_f1 ↑ |" in capsys.readouterr().out


def test_multiple_choice_data_then_eval(tmp_path, tiny_model_dir):
    csqa = tmp_path / "csqa.parquet"
    pq.write_table(pa.Table.from_pylist(CSQA), csqa)
    out = tmp_path / "csqa"
    argv = ["data", "multiple-choice", "--from", str(csqa), "--test-size", "4", "--seed", "3",
            "--prompt-style", "compact", "--out", str(out)]
    assert run(argv) == 0
    test = load_examples(out / "test.parquet")
    first = (out / "test.parquet").read_bytes()
    assert run([*argv, "--overwrite"]) == 0  # seeded: the same bytes
    assert (out / "test.parquet").read_bytes() == first
    assert all(e.ground_truth["choices"][ord(e.ground_truth["answer"]) - 65] ==
               f"place {e.index}-{e.index % 5}" for e in test)
    assert test[0].messages[0]["content"].startswith("Where would you put object 0?\nA) ")
    predictions, metrics = evaluate(tiny_model_dir, out / "test.parquet", tmp_path / "eval")
    assert metrics["count"] == 4 and set(metrics["by_group"]) == {"5 choices"}
    assert {p["group"] for p in predictions} == {"5 choices"}


def test_gpqa_shuffle_flags(tmp_path):
    gpqa = write_jsonl(tmp_path / "gpqa.jsonl", GPQA)
    assert run(["data", "multiple-choice", "--from", str(gpqa), "--test-size", "0",
                "--no-shuffle", "--out", str(tmp_path / "kept")]) == 0
    kept = load_examples(tmp_path / "kept" / "train.parquet")
    assert {e.ground_truth["answer"] for e in kept} == {"A"}  # GPQA lists the right one first
    assert run(["data", "multiple-choice", "--from", str(gpqa), "--test-size", "0",
                "--out", str(tmp_path / "shuffled")]) == 0
    shuffled = load_examples(tmp_path / "shuffled" / "train.parquet")
    assert [e.ground_truth["choices"][ord(e.ground_truth["answer"]) - 65] for e in shuffled] \
        == [str(i) for i in range(4)]
    assert {get_task("multiple_choice").difficulty(e.ground_truth) for e in shuffled} == {
        "Easy undergraduate level", "Hard graduate level"}


@pytest.mark.parametrize(("argv", "message"), [
    (["short-answer", "--from", "missing.jsonl"], "no such file"),
    (["short-answer", "--from", "BAD", "--prompt-style", "shout"], "unknown --prompt-style"),
    (["multiple-choice", "--from", "BAD"], "row 0: expected a CommonsenseQA"),
    (["short-answer", "--from", "BAD", "--test-size", "1", "--test-fraction", "0.5"],
     "either a test size or a test fraction"),
    (["short-answer", "--from", "BAD", "--n", "0"], "n must be at least 1"),
])
def test_bad_inputs_exit_2(tmp_path, capsys, argv, message):
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"question": "q", "answers": ["a b"]}])
    argv = [str(bad) if arg == "BAD" else str(tmp_path / arg) if arg.endswith(".jsonl")
            else arg for arg in argv]
    assert run(["data", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1
