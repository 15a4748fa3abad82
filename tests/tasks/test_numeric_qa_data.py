"""Numeric QA data: `{question, answer}` rows (parquet, JSON lines, a `datasets` folder, GSM8K
solutions) converted to the verl schema; malformed rows are one-line errors (exit code 2)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibrl.errors import UserError
from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples, write_examples
from cli_exit import run

QA = get_task("numeric_qa")
GSM8K_ANSWER = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
                "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")
ROWS = [
    {"question": "What is 2 + 3?", "answer": "5"},
    {"question": "What is half of 1?", "answer": "0.5"},
    {"question": "What  is 2 + 3?", "answer": "5"},  # the first question, spaced differently
    {"question": "How many clips did Natalia sell?", "answer": GSM8K_ANSWER},
    {"question": "What is 10 - 13?", "answer": "-3"},
    {"question": "What is 1000 + 234?", "answer": "1,234"},
]



def write_parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_convert_parquet_rows(tmp_path):
    result = QA.convert_file(write_parquet(tmp_path / "qa.parquet", ROWS), test_size=1)
    assert (result.rows_read, result.duplicates, result.unsolvable) == (6, 1, 0)
    assert [e.ground_truth["answer"] for e in result.test + result.train] == [
        "5", "0.5", "72", "-3", "1234"]
    gsm8k = result.train[1]
    assert gsm8k.extra["steps"] == ["Natalia sold 48/2 = 24 clips in May.",
                                    "Natalia sold 48+24 = 72 clips altogether in April and May."]
    assert QA.difficulty(gsm8k.ground_truth) == "2 steps"
    assert QA.difficulty(result.train[0].ground_truth) == "all"  # no working: group unknown
    assert QA.verify(QA.reference_trace(gsm8k), gsm8k.ground_truth)
    assert all(e.data_source == "numeric_qa" for e in result.train + result.test)


def test_converted_rows_round_trip_through_the_verl_schema(tmp_path):
    result = QA.convert_file(write_parquet(tmp_path / "qa.parquet", ROWS), test_size=0)
    path = write_examples(tmp_path / "out.parquet", result.train)
    assert load_examples(path) == result.train
    row = pq.read_table(path).to_pylist()[2]
    assert row["reward_model"]["ground_truth"] == {
        "question": "How many clips did Natalia sell?", "answer": "72", "num_steps": 2}
    assert row["extra_info"]["solution"] == "72"


def test_convert_a_folder_saved_by_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_list(ROWS[:2])
    dataset.save_to_disk(str(tmp_path / "one"))
    result = QA.convert_file(tmp_path / "one", test_size=0)
    assert [e.ground_truth["answer"] for e in result.train] == ["5", "0.5"]
    datasets.DatasetDict({"train": dataset, "test": dataset}).save_to_disk(str(tmp_path / "two"))
    with pytest.raises(UserError, match="pass one split's folder"):
        QA.convert_file(tmp_path / "two")
    assert len(QA.convert_file(tmp_path / "two" / "test", test_size=0).train) == 2
    with pytest.raises(UserError, match="not a folder saved by datasets"):
        QA.convert_file(tmp_path)


@pytest.mark.parametrize("bad_row, message", [
    ({"question": "Q?", "answer": "about five"}, "row 1: answer 'about five' is not a number"),
    ({"question": "Q?"}, "row 1: missing 'answer'"),
    ({"query": "Q?", "answer": "5"}, "row 1: missing 'question'"),
    ({"question": "", "answer": "5"}, "row 1: question is ''"),
    ({"question": "Q?", "answer": float("nan")}, "row 1: answer is nan"),
    ({"question": "Q?", "answer": "#### 1e9"}, "row 1: answer '1e9' is not a number"),
])
def test_malformed_row_is_one_line_exit_2(tmp_path, capsys, bad_row, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps(bad_row) + "\n")
    assert run(["data", "numeric-qa", "--from", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


def test_cli_generates_both_splits_deterministically(tmp_path, capsys):
    out = tmp_path / "qa"
    argv = ["data", "numeric-qa", "--n", "30", "--num-steps", "2..3", "--seed", "7",
            "--test-size", "6", "--prompt-style", "compact", "--out", str(out)]
    assert run(argv) == 0
    assert "(24 rows)" in capsys.readouterr().out
    train, test = load_examples(out / "train.parquet"), load_examples(out / "test.parquet")
    assert (len(train), len(test)) == (24, 6)
    assert {QA.difficulty(e.ground_truth) for e in train + test} == {"2 steps", "3 steps"}
    first = (out / "train.parquet").read_bytes()
    assert run([*argv, "--overwrite"]) == 0 and (out / "train.parquet").read_bytes() == first


def test_cli_converts_with_a_prompt_style(tmp_path, capsys):
    src = write_parquet(tmp_path / "qa.parquet", ROWS)
    argv = ["data", "numeric-qa", "--from", str(src), "--test-size", "1",
            "--prompt-style", "compact", "--out", str(tmp_path / "o")]
    assert run(argv) == 0
    assert "read 6 rows" in capsys.readouterr().out
    (test,) = load_examples(tmp_path / "o" / "test.parquet")
    assert test.messages == [{"role": "user", "content": "What is 2 + 3?"}]


@pytest.mark.parametrize("argv, message", [
    (["--num-steps", "two"], "--num-steps expects LO..HI"),
    (["--from", "x.parquet", "--seed", "1"], "--seed only apply when generating"),
    ([], "--n is required"),
    (["--n", "5", "--prompt-style", "tinyzero"], "unknown --prompt-style 'tinyzero'"),
    (["--from", "nowhere.csv"], "unknown file type"),
])
def test_cli_bad_options_are_one_line_exit_2(tmp_path, capsys, argv, message):
    argv = ["data", "numeric-qa", "--out", str(tmp_path / "o"), *argv]
    if "--from" not in argv and "--n" not in argv and "--num-steps" in argv:
        argv += ["--n", "5"]
    assert run(argv) == 2
    assert message in capsys.readouterr().err
