"""`data.columns.TARGET=SOURCE`: converting rows whose columns carry other names, written
locally in every real format (parquet, JSON lines, a JSON array, a folder saved by `datasets`,
and a Hub id with `load_dataset` replaced), through the tasks and through `calibrl data`."""

from __future__ import annotations

import dataclasses
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from calibrl.cli.main import main
from calibrl.errors import UserError
from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples

datasets = pytest.importorskip("datasets")

# Each task's rows with its question (and answer) under names no converter reads.
ROWS = {
    "short_answer": [{"prompt_text": f"Which river flows through town {i}?",
                      "gold": f"River {i}", "tier": "easy" if i % 2 else "hard"}
                     for i in range(6)],
    "math": [{"prompt_text": f"What is {i} + {i}?", "gold": str(2 * i), "tier": f"Level {i % 3}"}
             for i in range(6)],
    "multiple_choice": [{"prompt_text": f"Which number is {i}?", "options": [str(i), str(i + 1)],
                         "gold": 0, "tier": "easy"} for i in range(6)],
}
COLUMNS = {"question": "prompt_text", "answer": "gold", "difficulty": "tier"}
MAPPING = {"short_answer": COLUMNS, "math": COLUMNS,
           "multiple_choice": {**COLUMNS, "choices": "options"}}
FORMATS = ("parquet", "jsonl", "json", "save_to_disk", "hub")


def write(rows, fmt, tmp_path, monkeypatch):
    """`rows` stored in `fmt`; returns the `--from` spec that reads them."""
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
        return str(tmp_path / "rows.parquet")
    if fmt == "jsonl":
        (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return str(tmp_path / "rows.jsonl")
    if fmt == "json":
        (tmp_path / "rows.json").write_text(json.dumps(rows))
        return str(tmp_path / "rows.json")
    if fmt == "save_to_disk":
        datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
        return str(tmp_path / "saved")
    monkeypatch.setattr(datasets, "load_dataset",
                        lambda *args, **kwargs: datasets.Dataset.from_list(rows))
    return "someone/renamed-qa:test"


def expected_truth(name, row):
    if name == "multiple_choice":
        return {"question": row["prompt_text"], "choices": row["options"], "answer": "A",
                "difficulty": row["tier"]}
    answers = {"answers": [row["gold"]]} if name == "short_answer" else {"answer": row["gold"]}
    return {"question": row["prompt_text"], **answers, "difficulty": row["tier"]}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ROWS)
def test_a_mapped_file_converts_as_if_its_columns_had_the_known_names(name, fmt, tmp_path,
                                                                      monkeypatch):
    rows = ROWS[name]
    spec = write(rows, fmt, tmp_path, monkeypatch)
    task = dataclasses.replace(get_task(name), columns=tuple(MAPPING[name].items()))
    if name == "multiple_choice":
        task = dataclasses.replace(task, shuffle=False)  # the correct letter stays A
    result = task.convert_file(spec, test_size=2)
    assert (len(result.test), len(result.train)) == (2, 4)
    truths = [ex.ground_truth for ex in result.test + result.train]
    assert truths == [expected_truth(name, row) for row in rows]
    # Unmapped, the same rows have no question a converter knows.
    with pytest.raises(UserError, match="row 0: missing 'question'|row 0: expected"):
        get_task(name).convert_file(spec, test_size=2)


@pytest.mark.parametrize("name", ROWS)
def test_an_unknown_target_is_refused_before_anything_is_read(name, tmp_path):
    task = dataclasses.replace(get_task(name), columns=(("questoin", "prompt_text"),))
    with pytest.raises(UserError, match=rf"^data.columns.questoin: the {name} converter reads "
                       r"no column 'questoin' \(did you mean 'question'\?\)"):
        task.convert_file(tmp_path / "not-there.jsonl")  # not read: no 'no such file'


def test_the_verl_reader_takes_a_mapping_too(tmp_path):
    path = tmp_path / "public.jsonl"
    path.write_text('{"target": 3, "numbers": [1, 2]}\n')
    (example,) = load_examples(path, {"nums": "numbers"})
    assert example.ground_truth == {"target": 3, "numbers": [1, 2]}
    with pytest.raises(UserError, match="reads no column 'num' .did you mean 'nums'"):
        load_examples(path, {"num": "numbers"})


def run(argv, capsys):
    """Exit code and last stderr line of `calibrl <argv>`."""
    try:
        main(argv)
        code = 0
    except SystemExit as ex:
        code = ex.code
    err = capsys.readouterr().err.strip().splitlines()
    return code, err[-1] if err else ""


def test_calibrl_data_reads_the_mapping_from_key_value_settings(tmp_path, capsys):
    spec = write(ROWS["short_answer"], "jsonl", tmp_path, None)
    out = tmp_path / "out"
    code, _ = run(["data", "short-answer", "--from", spec, "--out", str(out), "--test-size", "2",
                   "data.columns.question=prompt_text", "data.columns.answer=gold"], capsys)
    assert code == 0
    test = load_examples(out / "test.parquet")
    assert [ex.ground_truth["answers"] for ex in test] == [["River 0"], ["River 1"]]
    assert test[0].messages[-1]["content"].startswith("Which river flows through town 0?")


@pytest.mark.parametrize("command,setting,message", [
    ("short-answer", "data.columns.qustion=prompt_text",
     "error: data.columns.qustion: the short_answer converter reads no column 'qustion' (did "
     "you mean 'question'?); it reads question, problem, answer, answers, difficulty, level"),
    ("math", "data.columns.question=title",
     "error: data.columns.question=title: {spec} has no column 'title' (its columns: gold, "
     "prompt_text, tier)"),
    ("multiple-choice", "data.columns.choices=",
     "error: config data.columns: a column name is empty in 'choices': ''; write "
     "data.columns.TARGET=SOURCE"),
    ("math", "data.colums.question=x",
     "error: unknown config key 'data.colums' (did you mean 'data.columns'?)"),
])
def test_bad_mappings_are_one_line_and_exit_code_2(command, setting, message, tmp_path, capsys):
    spec = write(ROWS["math"], "jsonl", tmp_path, None)
    code, err = run(["data", command, "--from", spec, "--out", str(tmp_path / "out"), setting],
                    capsys)
    assert (code, err) == (2, message.format(spec=spec))
    assert not (tmp_path / "out").exists()
