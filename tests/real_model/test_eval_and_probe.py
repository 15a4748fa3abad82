"""`calibrl eval` and `calibrl probe` on the real model, a handful of questions and traces: they
run through the command line, write their files, and count what they were asked to."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from calibrl.cli.main import main
from calibrl.probe.runner import iter_rows
from calibrl.protocol.tags import THINK_OPEN
from calibrl.tasks import get_task
from real_model.questions import question_examples, write_questions

pytestmark = pytest.mark.slow

SAMPLES, ANSWER_TOKENS, CONFIDENCE_TOKENS = 2, 16, 8


def _rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_eval_writes_one_record_per_answer(tmp_path, smollm2_dir, capsys):
    data = write_questions(tmp_path / "test.parquet", 3)
    out = tmp_path / "eval"
    main(["eval", "--model", str(smollm2_dir), "--data", str(data), "--out", str(out),
          "--samples", str(SAMPLES), "--temperature", "1", "--bootstrap", "20",
          "--max-answer-tokens", str(ANSWER_TOKENS),
          "--max-confidence-tokens", str(CONFIDENCE_TOKENS)])
    assert f"wrote {out.resolve()}" in capsys.readouterr().out

    rows = _rows(out / "predictions.jsonl")
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(rows) == metrics["count"] == 3 * SAMPLES
    assert Counter(r["index"] for r in rows) == {0: SAMPLES, 1: SAMPLES, 2: SAMPLES}
    assert sum(group["count"] for group in metrics["by_group"].values()) == len(rows)
    assert all(0 < r["answer_len"] <= ANSWER_TOKENS for r in rows)
    assert all(0 < r["conf_len"] <= CONFIDENCE_TOKENS for r in rows)
    # The rates are those of the records, whatever the model wrote.
    assert metrics["accuracy"] == pytest.approx(sum(r["correct"] for r in rows) / len(rows))
    assert metrics["unparsable_confidence_rate"] == pytest.approx(
        sum(r["confidence"] is None for r in rows) / len(rows))
    assert metrics["format_failure_rate"] == pytest.approx(
        sum(not r["format_ok"] for r in rows) / len(rows))
    assert metrics["bootstrap"]["accuracy"]["draws"] == 20
    # Japan's two questions are one readout cluster, Peru's its own.
    task = get_task("short_answer")
    assert [r["cluster"] for r in rows] == [str(task.readout_cluster(r["ground_truth"]))
                                            for r in rows]
    assert len({r["cluster"] for r in rows}) == 2
    for r in rows:
        assert 0 < r["answer_likelihood"] <= 1
        assert 0 <= r["readout"] <= 1  # the state at <confidence>, scored out of fold


def _probe(smollm2_dir, data, out, *extra):
    main(["probe", "--model", str(smollm2_dir), "--data", str(data), "--out", str(out),
          "--samples", str(SAMPLES), "--points", "0,0.5,1", "--max-answer-tokens", "8",
          "--no-progress", *extra])
    return list(iter_rows(out / "traces.jsonl"))


def _check_points(row):
    points = row["points"]
    assert [p["x"] for p in points] == [0.0, 0.5, 1.0]
    cuts = [p["cut"] for p in points]
    assert cuts[0] == 0 and cuts[-1] == row["chain_tokens"] and cuts == sorted(cuts)
    for p in points:
        assert 0 <= p["correct"] <= SAMPLES and 0 <= p["unfinished"] <= SAMPLES
        # Agreement with the final answer is undefined when the trace gave none.
        if row["final_answer"] is None:
            assert p["same"] is None
        else:
            assert 0 <= p["same"] <= SAMPLES
        assert p["confidence"] == p["correct"] / SAMPLES


def test_probe_given_traces_then_resumed_with_one_more(tmp_path, smollm2, smollm2_dir,
                                                       capsys):
    _, tokenizer = smollm2
    examples = question_examples(2)
    data = write_questions(tmp_path / "test.parquet", 2)
    traces = [
        {"index": 0, "chain_of_thought": "Peru is in South America. Its capital is Lima.",
         "final_answer": "Lima", "stated_confidence": 0.8},
        {"index": 1, "chain_of_thought": "Japan is an island country.\nIts capital is Tokyo.",
         "final_answer": "<answer>Tokyo</answer>"},
    ]
    given = tmp_path / "traces.jsonl"
    given.write_text("".join(json.dumps(t) + "\n" for t in traces))
    out = tmp_path / "probe"

    assert [r["trace"] for r in _probe(smollm2_dir, data, out, "--traces", str(given),
                                       "--limit", "1")] == [0]
    rows = _probe(smollm2_dir, data, out, "--traces", str(given), "--limit", "2")
    assert "probed 2 traces" in capsys.readouterr().out
    assert [r["trace"] for r in rows] == [0, 1]  # the second run probed only the new one

    think = tokenizer(THINK_OPEN, add_special_tokens=False)["input_ids"]
    for row, trace, example in zip(rows, traces, examples, strict=True):
        prompt = tokenizer.apply_chat_template(example.messages, add_generation_prompt=True,
                                               tokenize=False)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        assert row["context_tokens"] == len(prompt_ids) + len(think)  # `<think>` in pieces
        assert row["chain_tokens"] == len(tokenizer(trace["chain_of_thought"],
                                                    add_special_tokens=False)["input_ids"])
        assert row["final_correct"] and row["samples"] == SAMPLES
        _check_points(row)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["traces"] == 2 and summary["grid"] == [0.0, 0.5, 1.0]
    assert summary["stated_confidence"]["traces"] == 1
    for name in ("curves.png", "decided.png", "config.json"):
        assert (out / name).is_file()


def test_probe_a_trace_the_model_writes(tmp_path, smollm2_dir):
    data = write_questions(tmp_path / "test.parquet", 1)
    [row] = _probe(smollm2_dir, data, tmp_path / "probe", "--trace-max-tokens", "16")
    assert row["completion"] and row["chain_tokens"] <= 16
    assert row["context_tokens"] > 0
    _check_points(row)
