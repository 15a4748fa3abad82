"""Issue 43, points 3 and 5, across commands.

3. Nothing replaced silently: a command that writes a folder refuses one that already holds its
   output, in one line with exit code 2, unless given --overwrite (sft, train and calibrate
   always did; eval, the data commands and the demo replaced what was there).
5. Empty input is an error: a probe, an evaluation or a training run given no rows or traces
   stops with one line and exit code 2 (a probe of an empty traces file printed
   "probed 0 traces" and exited 0); a missing input file reads the same in every command.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from calibrl.cli.main import main

EVAL = ["--max-answer-tokens", "2", "--max-confidence-tokens", "2", "bootstrap=0",
        "readout=false"]


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("outputs")
    main(["data", "countdown", "--n", "6", "--test-size", "2", "--numbers", "3",
          "--max-number", "20", "--out", str(root / "data")])
    pq.write_table(pq.read_table(root / "data/train.parquet").slice(0, 0), root / "empty.parquet")
    (root / "empty.jsonl").write_text("")
    (root / "blank.jsonl").write_text("\n  \n")
    return root, tiny_model_dir


def _refused(argv: list[str], capsys) -> str:
    """The one stderr line of a command that must stop with exit code 2."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2, err
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err.removeprefix("error: ")


# --- 3. nothing replaced silently ----------------------------------------------------------

def test_eval_refuses_a_folder_holding_an_evaluation_unless_overwrite(files, tmp_path, capsys):
    root, model = files
    out = tmp_path / "eval"
    argv = ["eval", "--model", model, "--data", root / "data/test.parquet", "--out", out, *EVAL]
    main([str(a) for a in argv])
    first = (out / "predictions.jsonl").read_bytes()
    other = ["eval", "--model", model, "--data", root / "data/train.parquet", "--out", out, *EVAL]
    assert _refused(other, capsys) == (f"{out} already holds an evaluation; pass --overwrite to "
                                       "replace it")
    assert (out / "predictions.jsonl").read_bytes() == first  # the first one is whole
    main([str(a) for a in [*other, "--overwrite"]])
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 4  # the training split


def test_eval_of_several_files_refuses_when_one_of_its_folders_holds_one(files, tmp_path,
                                                                          capsys):
    root, model = files
    out = tmp_path / "cross"
    (out / "pooled").mkdir(parents=True)
    (out / "pooled" / "metrics.json").write_text("{}\n")
    err = _refused(["eval", "--model", model, "--data", root / "data/test.parquet", "--data",
                    root / "data/train.parquet", "--out", out, *EVAL], capsys)
    assert err == f"{out / 'pooled'} already holds an evaluation; pass --overwrite to replace it"


def test_eval_writes_into_a_folder_with_other_files(files, tmp_path):
    root, model = files
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    main([str(a) for a in ["eval", "--model", model, "--data", root / "data/test.parquet",
                           "--out", out, *EVAL]])
    assert (out / "metrics.json").is_file() and (out / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("command", [
    ["data", "countdown", "--n", "4", "--test-size", "1", "--numbers", "3"],
    ["data", "numeric-qa", "--n", "4", "--test-size", "1"],
])
def test_data_commands_refuse_a_folder_holding_splits_unless_overwrite(command, tmp_path,
                                                                        capsys):
    out = tmp_path / "data"
    main([*command, "--out", str(out)])
    first = (out / "train.parquet").read_bytes()
    assert _refused([*command, "--seed", "7", "--out", out], capsys) == (
        f"{out} already holds train.parquet, test.parquet; pass --overwrite to replace them")
    assert (out / "train.parquet").read_bytes() == first
    main([*command, "--seed", "7", "--out", str(out), "--overwrite"])
    assert (out / "train.parquet").read_bytes() != first


def test_demo_refuses_a_folder_holding_a_demo_unless_overwrite(tmp_path, capsys, monkeypatch):
    out = tmp_path / "demo"
    (out / "eval-before").mkdir(parents=True)
    (out / "report.md").write_text("# an earlier demo\n")
    assert _refused(["demo", "--out", out], capsys) == (
        f"{out} already holds a demo; pass --overwrite to replace it")
    assert sorted(p.name for p in out.iterdir()) == ["eval-before", "report.md"]

    from calibrl.demo import pipeline
    from calibrl.errors import UserError

    def first_stage(*args, **kwargs):
        raise UserError("the data stage began")

    monkeypatch.setattr(pipeline, "stage_data_and_rewards", first_stage)
    assert _refused(["demo", "--out", out, "--overwrite"], capsys) == "the data stage began"


# --- 5. empty input is an error --------------------------------------------------------------

def _commands(root: Path, model: Path, data: Path, out: Path) -> dict[str, list]:
    """A short run of each command that reads rows, on `data`."""
    return {
        "eval": ["eval", "--model", model, "--data", data, "--out", out, *EVAL],
        "sft": ["sft", "--model", model, "--data", data, "--out", out, "--steps", "1"],
        "calibrate": ["calibrate", "--model", model, "--data", data, "--out", out],
        "train": ["train", f"model.path={model}", f"data.train_path={data}",
                  f"logging.output_dir={out}", "logging.run_name=run"],
        "train held-out": ["train", f"model.path={model}",
                           f"data.train_path={root / 'data/train.parquet'}",
                           f"data.eval_path={data}", f"logging.output_dir={out}",
                           "logging.run_name=run"],
        "probe": ["probe", "--model", model, "--data", data, "--out", out],
    }


@pytest.mark.parametrize("command", ["eval", "sft", "calibrate", "train", "train held-out",
                                     "probe"])
def test_no_rows_is_one_line_exit_2(files, tmp_path, capsys, command):
    root, model = files
    empty = root / "empty.parquet"
    out = tmp_path / "out"
    assert _refused(_commands(root, model, empty, out)[command], capsys) == (
        f"{empty} holds no rows")
    assert not (out / "predictions.jsonl").exists()


@pytest.mark.parametrize("traces", ["empty.jsonl", "blank.jsonl"])
def test_a_probe_of_no_traces_is_one_line_exit_2(files, tmp_path, capsys, traces):
    root, model = files
    out = tmp_path / "probe"
    assert _refused(["probe", "--model", model, "--data", root / "data/test.parquet",
                     "--traces", root / traces, "--out", out], capsys) == (
        f"{root / traces} holds no traces")
    assert not out.exists()  # refused before the output folder is made


def test_a_probe_limited_to_no_trace_is_one_line_exit_2(files, tmp_path, capsys):
    root, model = files
    err = _refused(["probe", "--model", model, "--data", root / "data/test.parquet",
                    "--out", tmp_path / "p", "--limit", "0"], capsys)
    assert err == "limit 0 leaves no trace to probe"


def test_eval_limited_to_no_example_is_one_line_exit_2(files, tmp_path, capsys):
    root, model = files
    err = _refused(["eval", "--model", model, "--data", root / "data/test.parquet",
                    "--out", tmp_path / "e", "--max-examples", "0"], capsys)
    assert err == "max_examples 0 leaves no example to evaluate"


def _missing_cases(root: Path, model: Path, missing: Path, out: Path) -> dict[str, list]:
    data = root / "data/test.parquet"
    return {
        **{f"{name} data": argv for name, argv in _commands(root, model, missing, out).items()},
        "sft exclude": ["sft", "--model", model, "--data", data, "--exclude", missing,
                        "--out", out, "--steps", "1"],
        "probe traces": ["probe", "--model", model, "--data", data, "--traces", missing,
                         "--out", out],
        "eval config": ["eval", "--config", missing],
        "train config": ["train", "--config", missing],
        "demo config": ["demo", "--config", missing],
        "compare": ["compare", missing],
        "data --from": ["data", "countdown", "--from", missing, "--out", out],
    }


MISSING_CASES = list(_missing_cases(Path(), Path(), Path(), Path()))


@pytest.mark.parametrize("case", MISSING_CASES)
def test_a_missing_file_reads_the_same_in_every_command(files, tmp_path, capsys, case):
    root, model = files
    missing = tmp_path / "missing.jsonl"
    argv = _missing_cases(root, model, missing, tmp_path / "out")[case]
    where = missing / "metrics.json" if case == "compare" else missing
    assert _refused(argv, capsys) == f"{where}: no such file"

