"""`calibrl data countdown`: writes both splits, reports counts, bad input exits with code 2."""

import json

import pytest

from calibrl.cli.data_cmd import parse_range
from calibrl.errors import UserError
from calibrl.tasks.files import load_examples
from cli_exit import run


def test_generate_writes_both_splits(tmp_path, capsys):
    out = tmp_path / "cd"
    argv = [
        "data",
        "countdown",
        "--n",
        "20",
        "--numbers",
        "3..4",
        "--max-number",
        "30",
        "--seed",
        "4",
        "--out",
        str(out),
        "--test-size",
        "5",
    ]
    assert run(argv) == 0
    assert "(15 rows)" in capsys.readouterr().out
    train, test = load_examples(out / "train.parquet"), load_examples(out / "test.parquet")
    assert (len(train), len(test)) == (15, 5)
    assert {e.split for e in train} == {"train"} and {e.split for e in test} == {"test"}
    assert all(max(e.ground_truth["numbers"]) <= 30 for e in train + test)
    first = (out / "train.parquet").read_bytes()
    assert run([*argv, "--overwrite"]) == 0
    assert (out / "train.parquet").read_bytes() == first


def test_size_weights_and_compact_prompt(tmp_path, capsys):
    out = tmp_path / "cd"
    argv = ["data", "countdown", "--n", "60", "--numbers", "2..3", "--size-weights", "0,1",
            "--max-number", "20", "--prompt-style", "compact", "--out", str(out)]
    assert run(argv) == 0
    rows = load_examples(out / "train.parquet") + load_examples(out / "test.parquet")
    assert {len(e.ground_truth["numbers"]) for e in rows} == {3}
    first = rows[0]
    nums = " ".join(str(n) for n in first.ground_truth["numbers"])
    assert first.messages == [{"role": "user", "content": f"Numbers: {nums}. Target: "
                                                          f"{first.ground_truth['target']}."}]


def test_default_test_fraction(tmp_path, capsys):
    assert run(["data", "countdown", "--n", "10", "--out", str(tmp_path)]) == 0
    assert "(9 rows)" in capsys.readouterr().out
    assert len(load_examples(tmp_path / "test.parquet")) == 1


def test_convert_from_file(tmp_path, capsys):
    src = tmp_path / "raw.jsonl"
    rows = [
        {"target": 98, "nums": [44, 19, 35]},
        {"target": 98, "nums": [19, 35, 44]},
        {"target": 64, "nums": [63, 95, 96]},
        {"target": 7, "nums": [1, 1, 1]},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = [
        "data",
        "countdown",
        "--from",
        str(src),
        "--out",
        str(tmp_path / "out"),
        "--test-size",
        "1",
    ]
    assert run(argv) == 0
    printed = capsys.readouterr().out
    assert "read 4 rows" in printed and "dropped 1 duplicates and 1 unsolvable" in printed
    assert [
        e.ground_truth["target"] for e in load_examples(tmp_path / "out" / "train.parquet")
    ] == [64]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--n", "10", "--numbers", "5..3"], "1 <= min <= max"),
        (["--n", "10", "--numbers", "three"], "--numbers expects LO..HI"),
        (["--n", "10", "--targets", "1..2..3"], "--targets expects LO..HI"),
        (
            ["--n", "100", "--numbers", "1..1", "--max-number", "3", "--targets", "1..5"],
            "more than the 15 distinct",
        ),
        (["--n", "10", "--test-size", "2", "--test-fraction", "0.1"], "not both"),
        (["--n", "10", "--numbers", "2..4", "--size-weights", "1,x,1"], "comma-separated"),
        (["--n", "10", "--numbers", "2..4", "--size-weights", "1,1"], "one size weight per"),
        (["--n", "10", "--numbers", "2..3", "--size-weights", "1,-1"], "must be finite"),
        (["--n", "10", "--test-fraction", "2"], "test fraction must be in"),
        ([], "--n is required"),
        (["--from", "x.jsonl", "--seed", "3"], "--seed only apply when generating"),
        (["--from", "missing.jsonl"], "no such file"),
    ],
)
def test_bad_arguments_exit_2(tmp_path, capsys, extra, message):
    assert run(["data", "countdown", "--out", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert not (tmp_path / "train.parquet").exists()


def test_usage_errors_exit_2(tmp_path, capsys):
    assert run(["data", "countdown", "--n", "10"]) == 2  # no --out
    assert run(["data", "countdown", "--n", "ten", "--out", str(tmp_path)]) == 2
    assert "--out" in capsys.readouterr().err


def test_parse_range():
    assert parse_range("3..4", "--numbers") == (3, 4)
    assert parse_range("4", "--numbers") == (4, 4)
    with pytest.raises(UserError, match="--numbers"):
        parse_range("3-4", "--numbers")
