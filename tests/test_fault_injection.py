"""Fault injection: `data`, `sft`, `train`, `eval` and `probe` are SIGKILLed at random moments;
after each kill the outputs are the old result or the new one (never a mix), and resuming or
re-running finishes with exactly what an uninterrupted run gives: no step, row or file lost or
duplicated, no temporary left. Toy sizes; `CALIBRL_FAULT_SEED` picks other kill moments."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from calibrl.data import TaskExample
from calibrl.models import create_tiny_model
from calibrl.tasks.files import write_examples
from calibrl.utils.atomic import recover

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# One thread per process: the references and the killed runs must compute bit for bit the same.
ENV = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT / 'tests'}",
       "TQDM_DISABLE": "1", "OMP_NUM_THREADS": "1"}
KILLS = 2  # per command
# A kill timed on the first run's duration can miss when later runs are faster (warm imports):
# timed kills try again until KILLS have landed.
ATTEMPTS = 4 * KILLS
RNG = random.Random(int(os.environ.get("CALIBRL_FAULT_SEED", "0")))
TALLY: dict[str, list[str]] = {}  # command -> what each kill hit, printed at the end


def _run(*args: str) -> float:
    """Run `calibrl ARGS` to completion; returns its duration."""
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "calibrl", *map(str, args)], env=ENV, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def _kill_at_random(duration: float, *args: str,
                    progress: Callable[[], int] | None = None) -> bool:
    """Start `calibrl ARGS` and SIGKILL it at a random moment; False if it ended first.

    The moment: a random share of `duration`, or, with `progress` (a count of steps or rows on
    disk), a random short time after it grew by 1 or 2 (so the kill lands mid-run).
    """
    proc = subprocess.Popen([sys.executable, "-m", "calibrl", *map(str, args)], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait = RNG.uniform(0.3, 1.0) * duration
    if progress is not None:
        target, start = progress() + RNG.randint(1, 2), time.monotonic()
        while proc.poll() is None and progress() < target:
            assert time.monotonic() - start < 300, "the run made no progress"
            time.sleep(0.02)  # polling the log: the run's only observable progress
        wait = RNG.uniform(0.0, 0.5)
    try:
        proc.wait(timeout=wait)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True


def _count_rows(path: Path) -> int:
    return path.read_text().count("\n") if path.is_file() else 0


def _last_checkpoint(run: Path) -> int:
    return max((int(p.name[11:17]) for p in run.glob("checkpoint-??????")), default=0)


def _files(folder: Path, names: tuple[str, ...]) -> dict[str, bytes | None]:
    return {n: (folder / n).read_bytes() if (folder / n).is_file() else None for n in names}


def _no_temporaries(root: Path) -> None:
    left = [p for p in root.rglob("*") if p.name.startswith((".tmp-", ".old-"))
            or (p.name.startswith(".") and p.name.endswith(".tmp"))]
    assert not left, left


def _old_or_new(name: str, folder: Path, old: dict, new: dict, names: tuple[str, ...]) -> None:
    """After the next start's recovery the folder holds exactly one whole version."""
    recover(folder.parent)
    got = _files(folder, names)
    assert got in (old, new), f"{name}: a mix of two versions"
    TALLY.setdefault(name, []).append("new" if got == new and new != old else "old")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("faults")
    _run("data", "countdown", "--out", root / "data", "--n", 120, "--numbers", "3..3",
         "--max-number", 20, "--test-size", 8, "--prompt-style", "compact")
    from training.coin_task import COIN

    gts = [{"target": t, "numbers": [1, 2, t]} for t in range(3, 13)]
    coin = write_examples(root / "coin.parquet", [
        TaskExample(COIN.name, COIN.make_prompt(gt), gt, i, "train") for i, gt in enumerate(gts)])
    model = create_tiny_model(root / "model", hidden_size=32, num_layers=1, num_heads=2)
    return {"root": root, "data": root / "data", "coin": coin, "model": model}


def test_data_kills(tmp_path):
    _data_kills(tmp_path)
    _finish("data", tmp_path)


def test_eval_kills(inputs, tmp_path):
    _eval_kills(inputs, tmp_path)
    _finish("eval", tmp_path)


def test_sft_kills(inputs, tmp_path):
    _resumable_kills("sft", _sft_args(inputs), tmp_path, "sft_log.jsonl", "model")
    _finish("sft", tmp_path)


def test_train_kills(inputs, tmp_path):
    _resumable_kills("train", _train_args(inputs, tmp_path), tmp_path, "metrics.jsonl",
                     "final-model")
    _finish("train", tmp_path)


def test_probe_kills(inputs, tmp_path):
    _probe_kills(inputs, tmp_path)
    _finish("probe", tmp_path)


def _finish(name: str, root: Path) -> None:
    _no_temporaries(root)
    print(f"\n{name} kills: {TALLY.get(name, [])}")
    assert TALLY.get(name), f"{name}: no kill landed while the command ran"


def _data_kills(base: Path) -> None:
    from calibrl.tasks import get_task
    from calibrl.tasks.files import write_splits

    names = ("train.parquet", "test.parquet")
    args = ("data", "countdown", "--n", 60, "--numbers", "3..3", "--test-size", 10)

    def version(seed: int, folder: Path) -> dict[str, bytes | None]:
        task = get_task("countdown")
        train, test = task.generate(60, test_size=10, num_numbers=(3, 3), seed=seed,
                                    style=task.prompt_styles[0])
        write_splits(folder, {"train": train, "test": test})
        return _files(folder, names)

    new = version(1, base / "new")
    duration = _run(*args, "--out", base / "out", "--seed", 1)
    assert _files(base / "out", names) == new  # the command writes what the library does
    old = version(0, base / "out")
    for _ in range(ATTEMPTS):
        if _kill_at_random(duration, *args, "--out", base / "out", "--seed", 1, "--overwrite"):
            _old_or_new("data", base / "out", old, new, names)
            if len(TALLY.get("data", [])) >= KILLS:
                break


def _eval_kills(inputs: dict[str, Path], base: Path) -> None:
    names = ("predictions.jsonl", "metrics.json", "bins.json", "risk_coverage.json")
    args = ("eval", "--model", inputs["model"], "--data", inputs["data"] / "test.parquet",
            "--max-confidence-tokens", 4, "--name", "e")
    _run(*args, "--out", base / "new", "--max-answer-tokens", 8)
    new = _files(base / "new", names)
    duration = _run(*args, "--out", base / "out", "--max-answer-tokens", 4)
    old = _files(base / "out", names)
    assert old != new
    for _ in range(ATTEMPTS):
        if _kill_at_random(duration, *args, "--out", base / "out", "--max-answer-tokens", 8,
                           "--overwrite"):
            _old_or_new("eval", base / "out", old, new, names)
            if len(TALLY.get("eval", [])) >= KILLS:
                break
    _run(*args, "--out", base / "out", "--max-answer-tokens", 8, "--overwrite")
    assert _files(base / "out", names) == new


def _sft_args(inputs: dict[str, Path]) -> list:
    return ["sft", "--data", inputs["data"] / "train.parquet", "--model", inputs["model"],
            "--steps", 8, "--checkpoint-every", 2, "--batch-tokens", 256, "--no-bf16",
            "--device", "cpu", "--threads", 1]


def _train_args(inputs: dict[str, Path], base: Path) -> list:
    return ["train", f"model.path={inputs['model']}", f"data.train_path={inputs['coin']}",
            "data.task_modules=[training.coin_task]", "logging.tensorboard=false",
            "optim.total_steps=6", "checkpoint.every=2", "optim.lr=1e-2",
            "optim.scheduler=constant", "rollout.prompts_per_step=2",
            "rollout.num_generations_answer=2", "rollout.num_generations_confidence=2",
            "rollout.max_answer_tokens=8", "rollout.max_confidence_tokens=6",
            "logging.samples_every=1", f"logging.output_dir={base}"]


def _resumable_kills(name: str, args: list, base: Path, log: str, model: str) -> None:
    """Kill a run again and again, continuing it each time, then compare with a straight run."""
    where = (lambda d: ["--out", d]) if name == "sft" else (lambda d: [f"logging.run_name={d.name}"])
    duration = _run(*args, *where(base / "straight"))
    run, kills = base / "killed", 0
    while True:
        flag = (["--resume"] if any(run.glob("checkpoint-*")) else
                ["--overwrite"] if run.exists() and any(run.iterdir()) else [])
        # sft logs every 10 steps: its progress is its checkpoints (every 2 of its 8 steps).
        progress = ((lambda: _last_checkpoint(run)) if name == "sft"
                    else (lambda: _count_rows(run / log)))
        if kills >= KILLS or not _kill_at_random(duration, *args, *where(run), *flag,
                                                 progress=progress):
            break
        kills += 1
        what = "checkpoint" if name == "sft" else "logged steps"
        TALLY.setdefault(name, []).append(f"at {what} {progress()}")
    if not (run / model).is_dir():
        _run(*args, *where(run), *(["--resume"] if any(run.glob("checkpoint-*")) else
                                   ["--overwrite"] if run.exists() else []))
    expected = load_file(str(base / "straight" / model / "model.safetensors"))
    got = load_file(str(run / model / "model.safetensors"))
    assert all(torch.equal(expected[k], got[k]) for k in expected), f"{name}: other weights"
    keys = ("step", "loss", "train/loss", "answer/reward_mean")
    rows = [{k: r.get(k) for k in keys} for r in map(json.loads, (run / log).open())]
    straight = [{k: r.get(k) for k in keys} for r in map(json.loads, (base / "straight" / log).open())]
    assert rows == straight, f"{name}: log rows lost or duplicated"


def _probe_kills(inputs: dict[str, Path], base: Path) -> None:
    args = ["probe", "--model", inputs["model"], "--data", inputs["data"] / "test.parquet",
            "--limit", 6, "--samples", 2, "--traces-per-batch", 1, "--trace-max-tokens", 12,
            "--max-answer-tokens", 6, "--device", "cpu", "--no-progress"]
    duration = _run(*args, "--out", base / "straight")
    for _ in range(KILLS):
        if _kill_at_random(duration, *args, "--out", base / "out",
                           progress=lambda: _count_rows(base / "out/traces.jsonl")):
            done = _count_rows(base / "out/traces.jsonl")
            TALLY.setdefault("probe", []).append(f"after {done} traces")
    _run(*args, "--out", base / "out")
    rows = (base / "out/traces.jsonl").read_text().splitlines()
    assert rows == (base / "straight/traces.jsonl").read_text().splitlines()
    assert (base / "out/summary.json").read_bytes() == (base / "straight/summary.json").read_bytes()
