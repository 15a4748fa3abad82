"""Runs that survive what clusters do to them, end to end on real processes: a stop signal
checkpoints the step reached and exits 75, and `--resume` ends with an uninterrupted run's
weights (`train`, `sft`, and two ranks of which only one is signalled); a second signal ends the
process at once; a disk that fills stops the run with one line naming the path, and the run
resumes elsewhere from its last intact checkpoint."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from calibrl.training.checkpoint import list_checkpoints, verify_checkpoint
from calibrl.training.preemption import REPEAT_AFTER_S
from training.coin_runs import checkout_env, coin_run, free_port, run_settings
from training.held_step import held_env
from training.small_disk import small_disk

pytestmark = pytest.mark.slow

ENV = checkout_env(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", TQDM_DISABLE="1")
STOPPED = re.compile(r"calibrl: stopped by (\S+(?: \S+)*) after step (\d+); checkpoint (\S+) "
                     r"holds it: continue with --resume \(exit code 75\)")


def _train_args(model: Path, train: Path, out: Path, *extra: str) -> list[str]:
    return ["train", *run_settings(model, train, out, "data.task_modules=[training.coin_task]",
                                   "optim.total_steps=8", "logging.samples_every=1", *extra)]


def _calibrl(*args: str, env: dict[str, str] = ENV, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "calibrl", *map(str, args)], env=env,
                            **popen)


def _finish(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "calibrl", *map(str, args)], env=ENV,
                          capture_output=True, text=True)


def _rows(path: Path) -> int:
    return path.read_text().count("\n") if path.is_file() else 0


def _wait_until(done: Callable[[], bool], proc: subprocess.Popen) -> None:
    """Poll the run's files until `done` (the run's only observable progress)."""
    start = time.monotonic()
    while not done():
        assert proc.poll() is None, "the run ended before the signal"
        assert time.monotonic() - start < 300, "the run made no progress"
        time.sleep(0.02)


def _signal_after(rows: int, log: Path, signum: int, *args: str, err: Path) -> tuple[int, str]:
    """Start `calibrl ARGS`, held after step `rows` (`training.held_step`); once `log` has its
    `rows` rows, send `signum` and let it go on; (exit code, stderr)."""
    release = err.with_name("release")
    with err.open("w") as stderr:
        proc = _calibrl(*args, env=held_env(ENV, rows, release), stdout=subprocess.DEVNULL,
                        stderr=stderr)
        _wait_until(lambda: _rows(log) >= rows, proc)
        proc.send_signal(signum)
        _wait_until(lambda: "received" in err.read_text(), proc)
        release.touch()
        code = proc.wait(timeout=300)
    return code, err.read_text()


def _same_weights(a: Path, b: Path) -> bool:
    expected, got = load_file(str(a)), load_file(str(b))
    return expected.keys() == got.keys() and all(torch.equal(expected[k], got[k])
                                                 for k in expected)


def _stopped(stderr: str) -> re.Match:
    last = stderr.strip().splitlines()[-1]
    match = STOPPED.fullmatch(last)
    assert match, stderr[-2000:]
    assert "Traceback" not in stderr
    return match


def test_sigterm_checkpoints_the_step_reached_and_resume_ends_as_a_straight_run(tmp_path):
    model, train = coin_run(tmp_path)
    assert _finish(*_train_args(model, train, tmp_path / "straight")).returncode == 0
    run = tmp_path / "stopped/run"
    code, err = _signal_after(2, run / "metrics.jsonl", signal.SIGTERM,
                              *_train_args(model, train, tmp_path / "stopped"),
                              err=tmp_path / "err")
    assert code == 75, err[-2000:]
    match = _stopped(err)
    step = int(match[2])
    assert match[1] == "SIGTERM" and step == 2
    assert match[3] == str(run / f"checkpoint-{step:06d}")
    # checkpoint.every=100: the only checkpoint is the one the signal asked for, and it is whole.
    assert [c.step for c in list_checkpoints(run)] == [step]
    assert verify_checkpoint(list_checkpoints(run)[0]) is None
    assert not (run / "final-model").exists() and _rows(run / "metrics.jsonl") == step

    done = _finish(*_train_args(model, train, tmp_path / "stopped"), "--resume")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"(step {step})" in done.stdout
    assert _same_weights(tmp_path / "straight/run/final-model/model.safetensors",
                         run / "final-model/model.safetensors")
    assert (run / "metrics.jsonl").read_text().count("\n") == 8


def test_a_second_signal_ends_the_run_at_once(tmp_path):
    model, train = coin_run(tmp_path)
    run = tmp_path / "run"
    # Held after step 1, never released (`training.held_step`): the second signal comes after
    # REPEAT_AFTER_S (before it, it would be the first one passed on by a launcher) and before
    # the run could act on the first, however slow the machine.
    env = held_env(ENV, 1, tmp_path / "never")
    with (tmp_path / "err").open("w") as stderr:
        proc = _calibrl(*_train_args(model, train, tmp_path), env=env,
                        stdout=subprocess.DEVNULL, stderr=stderr)
        _wait_until(lambda: _rows(run / "metrics.jsonl") >= 1, proc)
        proc.send_signal(signal.SIGTERM)
        _wait_until(lambda: "SIGTERM received" in (tmp_path / "err").read_text(), proc)
        time.sleep(REPEAT_AFTER_S + 0.2)
        assert proc.poll() is None, "the run went on while it was held"
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        finally:
            proc.kill()  # a second signal that failed to end it must not leave it running
    assert code == -signal.SIGTERM  # the default action: no checkpoint, exit status 143
    assert list_checkpoints(run) == []


def test_sft_stops_on_sigusr1_and_resumes_to_the_same_model(tmp_path):
    data = tmp_path / "data"
    assert _finish("data", "countdown", "--out", data, "--n", 120, "--numbers", "3..3",
                   "--max-number", 20, "--test-size", 8).returncode == 0
    coin_run(tmp_path)  # its tiny model
    args = ["sft", "--data", data / "train.parquet", "--model", tmp_path / "model",
            "--steps", 16, "--checkpoint-every", 100, "--batch-tokens", 256, "--no-bf16",
            "--device", "cpu", "--threads", 1, "log_every=1", "progress=false"]
    assert _finish(*args, "--out", tmp_path / "straight").returncode == 0
    out = tmp_path / "stopped"
    code, err = _signal_after(3, out / "sft_log.jsonl", signal.SIGUSR1, *args, "--out", out,
                              err=tmp_path / "err")
    assert code == 75, err[-2000:]
    match = _stopped(err)
    step = int(match[2])
    assert match[1] == "SIGUSR1" and step == 3
    assert [c.step for c in list_checkpoints(out)] == [step]
    done = _finish(*args, "--out", out, "--resume")
    assert done.returncode == 0, done.stderr[-2000:]
    assert _same_weights(tmp_path / "straight/model/model.safetensors",
                         out / "model/model.safetensors")
    assert (out / "sft_log.jsonl").read_text().count("\n") == 16


def _tmpfs_bytes(files: list[Path]) -> int:
    """What `files` take on a tmpfs: whole pages."""
    return sum(-(-p.stat().st_size // 4096) * 4096 for p in files)


def test_a_full_disk_stops_in_one_line_and_the_run_resumes_elsewhere(tmp_path, monkeypatch):
    model, train = coin_run(tmp_path)
    # Checkpoints every step, the newest kept: writing checkpoint 2 needs room for two.
    every = ["checkpoint.every=1", "checkpoint.keep_last=1"]
    straight = tmp_path / "straight"
    assert _finish(*_train_args(model, train, straight, *every)).returncode == 0
    files = [p for p in (straight / "run").rglob("*") if p.is_file()]
    ckpt = _tmpfs_bytes([p for p in files if "checkpoint-000008" in p.parts])
    rest = _tmpfs_bytes([p for p in files if not {"checkpoint-000008", "final-model"} & {
        *p.parts}])
    kib = (rest + ckpt * 3 // 2) // 1024 + 8  # the logs, one checkpoint and half of the next
    with small_disk(tmp_path / "disk", kib) as disk:
        if disk is not None:
            run = disk / "run"
            done = _finish(*_train_args(model, train, disk, *every))
            code, err = done.returncode, done.stderr
        else:  # no tmpfs here: the second checkpoint's torch.save meets a full disk
            code, err, run = _in_process_full_disk(monkeypatch, tmp_path, model, train, every)
        line = err.strip().splitlines()[-1]
        assert code == 2 and "Traceback" not in err, err[-2000:]
        assert re.fullmatch(rf"error: cannot write {run}/\S+: No space left on device", line), line
        assert not [p for p in run.rglob("*") if p.name.startswith((".tmp-", ".old-"))]
        last = list_checkpoints(run)[-1]
        assert verify_checkpoint(last) is None and last.step >= 1
        # Elsewhere, from that checkpoint: the straight run's weights.
        elsewhere = tmp_path / "elsewhere"
        done = _finish(*_train_args(model, train, elsewhere, *every,
                                    f"checkpoint.resume={last.path}"))
        assert done.returncode == 0, done.stderr[-2000:]
    assert _same_weights(straight / "run/final-model/model.safetensors",
                         elsewhere / "run/final-model/model.safetensors")


def _in_process_full_disk(monkeypatch, tmp_path: Path, model: Path, train: Path,
                          every: list[str]) -> tuple[int, str, Path]:
    """`calibrl train` in this process, its second checkpoint failing as on a full disk."""
    import calibrl.utils.write_errors as write_errors
    from calibrl.cli.main import main

    real_save, calls = torch.save, []

    def save(obj, path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1 vs 2")
        return real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    monkeypatch.setattr(write_errors, "probe_write", lambda folder: errno.ENOSPC)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit) as exit_:
        main(_train_args(model, train, tmp_path / "disk", *every))
    return int(exit_.value.code), stderr.getvalue(), (tmp_path / "disk/run").absolute()


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def _launch(model: Path, train: Path, out: Path, *extra: str, env: dict[str, str] = ENV,
            **popen) -> subprocess.Popen:
    """`accelerate launch` of `calibrl train` on 2 CPU ranks, as the README says."""
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    return subprocess.Popen(
        [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
         str(free_port()), "-m", "calibrl", *_train_args(model, train, out, *extra)],
        env={**env, "ACCELERATE_USE_CPU": "1"}, stdout=subprocess.DEVNULL, **popen)


def _stopped_ranks(err: str, run: Path) -> int:
    """The step two ranks stopped after: said once, by the main process, and checkpointed."""
    lines = [m for m in map(STOPPED.search, err.splitlines()) if m]
    assert len(lines) == 1, err[-3000:]
    step = int(lines[0][2])
    assert [c.step for c in list_checkpoints(run)] == [step]
    assert (run / f"checkpoint-{step:06d}/accelerate").is_dir()
    return step


def test_two_ranks_stop_after_the_same_step_when_one_is_signalled(tmp_path):
    model, train = coin_run(tmp_path)
    assert _launch(model, train, tmp_path / "straight").wait(timeout=600) == 0
    run = tmp_path / "stopped/run"
    with (tmp_path / "err").open("w") as stderr:
        proc = _launch(model, train, tmp_path / "stopped", stderr=stderr,
                       env=held_env(ENV, 2, tmp_path / "release"))
        _wait_until(lambda: _rows(run / "metrics.jsonl") >= 2, proc)  # held after step 2
        ranks = _children(proc.pid)
        assert len(ranks) == 2
        # One rank only, as when a scheduler's signal reaches the processes at different times.
        subprocess.run(["kill", "-USR1", str(ranks[-1])], check=True)
        (tmp_path / "release").touch()
        assert proc.wait(timeout=600) != 0  # the launcher's own code: a rank exited with 75
    err = (tmp_path / "err").read_text()
    assert "exitcode  : 75" in err, err[-3000:]  # the launcher's report of its failed ranks
    assert _stopped_ranks(err, run) == 2
    assert _launch(model, train, tmp_path / "stopped", "--resume").wait(timeout=600) == 0
    assert _same_weights(tmp_path / "straight/run/final-model/model.safetensors",
                         run / "final-model/model.safetensors")


def test_the_launcher_passing_on_a_signal_the_ranks_got_is_one_request(tmp_path):
    model, train = coin_run(tmp_path)
    run = tmp_path / "run"
    with (tmp_path / "err").open("w") as stderr:
        proc = _launch(model, train, tmp_path, stderr=stderr, start_new_session=True,
                       env=held_env(ENV, 2, tmp_path / "release"))
        _wait_until(lambda: _rows(run / "metrics.jsonl") >= 2, proc)  # held after step 2
        # As Slurm (every process of the step) or Ctrl-C (the foreground group) does: the
        # launcher and both ranks get it, and the launcher sends its ranks SIGTERM again.
        os.killpg(proc.pid, signal.SIGTERM)
        _wait_until(lambda: "received" in (tmp_path / "err").read_text(), proc)
        time.sleep(0.5)  # the launcher's forwarded SIGTERM reaches the ranks while they hold
        (tmp_path / "release").touch()
        proc.wait(timeout=600)
    assert _stopped_ranks((tmp_path / "err").read_text(), run) == 2
