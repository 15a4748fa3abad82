"""Bad input to any command: exit code 2, one `error:` line, no traceback, old outputs untouched.

Issue 13's list of causes that used to end in a traceback, one row each. Every row runs the CLI
in-process against a target folder that already holds earlier outputs; after the refusal each of
them must hold the same bytes. (A probe records its settings in its own new folder before it
streams the traces, so new files are not forbidden.) Rows that must not touch the network or the disk's real
limits simulate them (`setup`), so the table runs offline on CPU in seconds per row.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from calibrl.cli.main import main
from calibrl.models import create_tiny_model

OLD = b"an earlier run's output\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-inputs")
    create_tiny_model(root / "model", hidden_size=32, num_layers=1, num_heads=2)
    truncated = create_tiny_model(root / "truncated", hidden_size=32, num_layers=1, num_heads=2)
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    rows = [{"target": 3, "nums": [1, 2]}, {"target": 7, "nums": [3, 4]}]
    (root / "good.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # Generated rows carry the reference solutions that SFT needs.
    main(["data", "countdown", "--n", "8", "--numbers", "3", "--max-number", "20",
              "--out", str(root)])  # root/train.parquet and root/test.parquet
    pq.write_table(pq.read_table(root / "train.parquet").slice(0, 0), root / "empty.parquet")
    (root / "huge.jsonl").write_text('{"target": 3, "nums": [1, ' + "9" * 5000 + "]}\n")
    (root / "huge.json").write_text('[{"target": ' + "9" * 5000 + ', "nums": [1, 2]}]')
    (root / "latin1.yaml").write_bytes(b"seed: 1  # caf\xe9\n")
    (root / "latin1.jsonl").write_bytes(b'{"chain_of_thought": "caf\xe9", "final_answer": "3"}\n')
    trace = {"chain_of_thought": "1 plus 2", "final_answer": "1+2", "index": 0}
    (root / "empty_prompt.jsonl").write_text(json.dumps({**trace, "prompt": []}) + "\n")
    (root / "runs/prior").mkdir(parents=True)  # what an earlier `train` leaves
    (root / "runs/prior/config.yaml").write_text("seed: 0\n")
    (root / "runs/prior/metrics.jsonl").write_text('{"step": 1}\n')
    (root / "empty_prompt_text.jsonl").write_text(json.dumps({**trace, "prompt": ""}) + "\n")
    return root


def _disk_full(monkeypatch, root):
    def no_space(table, where, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(where))

    monkeypatch.setattr(pq, "write_table", no_space)


def _hub_unreachable(monkeypatch, root):
    import huggingface_hub

    def offline(*args, **kwargs):
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", offline)


def _local_models_folder(monkeypatch, root):
    # `models/nope` with a local `models/` folder: a missing local path, never a Hub id.
    (root / "cwd" / "models").mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(root / "cwd")
    _hub_unreachable(monkeypatch, root)  # and the Hub is not asked: see the assertion below


# (argv, setup, expected text in the error). In argv, {root} is the fixture folder, {target} the
# folder that holds the earlier output, {blocker} a file inside it standing where a folder or an
# output should go.
TRAIN = ["train", "model.path={root}/model", "data.train_path={root}/train.parquet",
         "logging.output_dir={target}/runs", "logging.tensorboard=false", "optim.total_steps=1"]
EVAL = ["eval", "--model", "{root}/model", "--data", "{root}/train.parquet"]
PROBE = ["probe", "--model", "{root}/model", "--data", "{root}/good.jsonl", "--no-progress"]
CASES = {
    # Output paths: a file, under a file, not writable, disk full.
    "data --out is a file": (["data", "countdown", "--n", "4", "--out", "{blocker}"], None,
                             "exists and is not a folder"),
    "data --out under a file": (["data", "countdown", "--n", "4", "--out", "{blocker}/d"], None,
                                "is a file, not a folder"),
    "data --out not writable": (["data", "countdown", "--n", "4", "--out", "/proc/calibrl-x"],
                                None, "cannot write in /proc"),
    "data disk full": (["data", "countdown", "--n", "4", "--out", "{target}", "--overwrite"],
                       _disk_full, "No space left on device"),
    "model init --out is a file": (["model", "init", "--out", "{blocker}"], None,
                                   "exists and is not a folder"),
    "model init --out under a file": (["model", "init", "--out", "{blocker}/m"], None,
                                      "is a file, not a folder"),
    "model init --out not writable": (["model", "init", "--out", "/proc/calibrl-x"], None,
                                      "cannot write in /proc"),
    "eval --out is a file": ([*EVAL, "--out", "{blocker}"], None, "exists and is not a folder"),
    "eval --out not writable": ([*EVAL, "--out", "/proc/calibrl-x"], None, "cannot write"),
    "sft --out is a file": (["sft", "--data", "{root}/train.parquet", "--model", "{root}/model",
                             "--steps", "1", "--out", "{blocker}"], None, "{blocker}"),
    "train output_dir is a file": ([*TRAIN, "logging.output_dir={blocker}"], None, "{blocker}"),
    "probe --out is a file": ([*PROBE, "--out", "{blocker}"], None, "{blocker}"),
    "demo --out is a file": (["demo", "--out", "{blocker}"], None, "{blocker}"),
    "compare --plot under a file": (["compare", "{target}", "--plot", "{blocker}/p.png"], None,
                                    "is not a folder"),
    "compare --plot out.xyz": (["compare", "{target}", "--plot", "{target}/out.xyz"], None,
                               "unknown figure format '.xyz'"),
    # Models.
    "truncated model.safetensors": ([*EVAL, "--model", "{root}/truncated", "--out", "{target}",
                                     "--overwrite"], None, "cannot load model"),
    "missing local model path": ([*EVAL, "--model", "models/nope", "--out", "{target}",
                                  "--overwrite"], _local_models_folder, "model path not found"),
    "Hub id, Hub unreachable": ([*EVAL, "--model", "nobody/nope", "--out", "{target}",
                                 "--overwrite"], _hub_unreachable, "cannot be reached"),
    "huge model config": (["model", "init", "--out", "{target}/m", "--hidden-size", "65536",
                           "--num-heads", "1"], None, "over the tiny model's limit"),
    # Data and config files.
    "JSON-lines int over 4,300 digits": ([*EVAL, "--data", "{root}/huge.jsonl", "--out",
                                          "{target}"], None, "exceeds the limit (4300 digits)"),
    "JSON int over 4,300 digits": (["data", "countdown", "--from", "{root}/huge.json", "--out",
                                    "{target}", "--overwrite"], None,
                                   "exceeds the limit (4300 digits)"),
    "non-UTF-8 config": (["train", "--config", "{root}/latin1.yaml"], None, "not UTF-8"),
    "non-UTF-8 traces": ([*PROBE, "--traces", "{root}/latin1.jsonl", "--out", "{target}/p"],
                         None, "not UTF-8"),
    "empty train parquet": ([*TRAIN, "data.train_path={root}/empty.parquet"], None,
                            "holds no rows"),
    "probe trace with empty chat prompt": ([*PROBE, "--traces", "{root}/empty_prompt.jsonl",
                                            "--out", "{target}/p"], None, "'prompt' is empty"),
    "probe trace with empty prompt text": ([*PROBE, "--traces",
                                            "{root}/empty_prompt_text.jsonl", "--out",
                                            "{target}/p"], None, "'prompt' is empty"),
    # Settings the libraries would refuse only minutes later (numpy seeds, torch's betas), or
    # that would train an all-NaN model.
    "train seed over 2**32": ([*TRAIN, "seed=4294967296"], None, "config seed:"),
    "sft negative seed": (["sft", "--data", "{root}/train.parquet", "--steps", "1", "--seed",
                           "-1", "--out", "{target}"], None, "config seed:"),
    "demo negative seed": (["demo", "--out", "{target}/demo", "seed=-1"], None, "config seed:"),
    "train Adam beta of 1": ([*TRAIN, "optim.betas=[0.9, 1.0]"], None, "optim.betas.1"),
    "train infinite lr": ([*TRAIN, "optim.lr=.inf"], None, "optim.lr: Input should be a finite"),
    "train infinite lambda": ([*TRAIN, "algorithm.lambda_conf=.inf"], None, "finite number"),
    "eval --temperature -1": ([*EVAL, "--temperature", "-1", "--out", "{target}"], None,
                              "temperature"),
    # Run directories: one that holds a run is continued or replaced only when asked.
    "train into a run without --resume": ([*TRAIN, "logging.output_dir={root}/runs",
                                           "logging.run_name=prior"], None, "--resume"),
    "train --resume with nothing to resume": ([*TRAIN, "--resume"], None, "resume"),
    # Folders that hold an evaluation or data splits: replaced only with --overwrite (issue 43).
    "eval into an evaluation": ([*EVAL, "--out", "{target}"], None,
                                "{target} already holds an evaluation; pass --overwrite"),
    "data into splits": (["data", "countdown", "--n", "4", "--out", "{target}"], None,
                         "{target} already holds train.parquet; pass --overwrite"),
    # Refused cleanly before this change too; kept so they stay so (a negative count is now
    # refused by the settings, before any data is read).
    "eval --max-examples -48": ([*EVAL, "--max-examples", "-48", "--out", "{target}"], None,
                                "max_examples"),
    "eval on an empty parquet": ([*EVAL, "--data", "{root}/empty.parquet", "--out", "{target}"],
                                 None, "empty.parquet holds no rows"),
}


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_exit_2_and_old_outputs_stay(files, tmp_path, monkeypatch, capsys,
                                                           name):
    argv, setup, expected = CASES[name]
    target = tmp_path / "target"
    target.mkdir()
    (target / "metrics.json").write_bytes(OLD)  # an earlier run's output
    (target / "train.parquet").write_bytes(OLD)
    blocker = target / "blocker"
    blocker.write_bytes(OLD)
    before = _snapshot(target)
    fill = {"root": files, "target": target, "blocker": blocker}
    # The real CLI turns transformers' progress bars off before importing it (main's
    # _quiet_libraries); in this process transformers was imported earlier, so do it here.
    import transformers

    monkeypatch.setattr(transformers.utils.logging, "_tqdm_active", False)
    if setup is not None:
        setup(monkeypatch, files)
    with pytest.raises(SystemExit) as info:
        main([arg.format(**fill) for arg in argv])
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert err.count("\n") == 1 and err.startswith("error:") and "Traceback" not in err, err
    assert expected.format(**fill) in err
    after = _snapshot(target)
    assert {path: after.get(path) for path in before} == before
