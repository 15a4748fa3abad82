"""`calibrl data math` on GSM8K and MATH rows written locally in their public field names: both
splits written in the task's schema; bad input exits with code 2."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples
from cli_exit import run

GSM8K = [{"question": f"Tom has {i} apples and buys {i} more. How many does he have?",
          "answer": f"He has {i} + {i} = {2 * i}.\n#### {2 * i}"} for i in range(1, 6)]
MATH_ROWS = [{"problem": f"What is ${i} \\cdot \\frac{{1}}{{2}}$?",
              "solution": f"It is $\\boxed{{\\frac{{{i}}}{{2}}}}$.", "level": f"Level {i}",
              "type": "Prealgebra"} for i in range(1, 4)]



def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_data_math_writes_both_splits(tmp_path, capsys):
    for name, rows in (("gsm8k", GSM8K), ("math", MATH_ROWS)):
        out = tmp_path / name
        assert run(["data", "math", "--from", str(write_jsonl(tmp_path / f"{name}.jsonl", rows)),
                    "--out", str(out), "--test-size", "1", "--prompt-style", "compact"]) == 0
        assert pq.read_schema(out / "train.parquet") == get_task("math").arrow_schema()
        train, test = load_examples(out / "train.parquet"), load_examples(out / "test.parquet")
        assert len(train) + len(test) == len(rows) and len(test) == 1
        assert all(e.data_source == "math" for e in train + test)
    assert [e.ground_truth["difficulty"] for e in train] == ["Level 2", "Level 3"]
    assert f"read {len(MATH_ROWS)} rows" in capsys.readouterr().out


def test_data_math_bad_input_exits_2(tmp_path, capsys):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"problem": "p", "solution": "no box"}])
    assert run(["data", "math", "--from", str(path), "--out", str(tmp_path / "o")]) == 2
    assert run(["data", "math", "--from", str(tmp_path / "x.jsonl"), "--out",
                str(tmp_path / "o")]) == 2
    assert run(["data", "math", "--from", str(path), "--out", str(tmp_path / "o"),
                "--prompt-style", "nope"]) == 2
