"""Atomic multi-file writes leave the old version or the new one; stale temporaries are cleaned;
a run directory is locked to one process, and the lock of a dead process is taken over."""

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from calibrl.data import TaskExample
from calibrl.errors import UserError
from calibrl.tasks.countdown import COUNTDOWN
from calibrl.tasks.files import load_examples, write_examples, write_splits
from calibrl.utils.atomic import atomic_dir, recover
from calibrl.utils.run_dir import RunLock, plan_run_dir

SRC = Path(__file__).resolve().parents[2] / "src"


def _examples(target: int, n: int = 3) -> list[TaskExample]:
    gt = {"target": target, "numbers": [1, 2, target]}
    return [TaskExample("countdown", COUNTDOWN.make_prompt(gt), gt, i, "train") for i in range(n)]


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def _targets(path: Path) -> set[int]:
    return {ex.ground_truth["target"] for ex in load_examples(path)}


def test_failure_between_the_split_writes_keeps_the_old_pair(tmp_path, monkeypatch):
    write_splits(tmp_path, {"train": _examples(5), "test": _examples(6)})
    (tmp_path / "notes.txt").write_text("mine")
    real_write = pq.write_table
    calls = []

    def dying_write(table, where, **kw):
        calls.append(where)
        if len(calls) == 2:  # the new train split is written, the test split is not
            raise KeyboardInterrupt
        real_write(table, where, **kw)

    monkeypatch.setattr(pq, "write_table", dying_write)
    with pytest.raises(KeyboardInterrupt):
        write_splits(tmp_path, {"train": _examples(7), "test": _examples(8)})
    assert (_targets(tmp_path / "train.parquet"), _targets(tmp_path / "test.parquet")) == ({5}, {6})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "test.parquet",
                                                          "train.parquet"]
    monkeypatch.setattr(pq, "write_table", real_write)
    write_splits(tmp_path, {"train": _examples(7), "test": _examples(8)})
    assert (_targets(tmp_path / "train.parquet"), _targets(tmp_path / "test.parquet")) == ({7}, {8})
    assert (tmp_path / "notes.txt").read_text() == "mine"  # not the output's: carried over


def test_a_kill_between_the_two_renames_is_undone_on_the_next_start(tmp_path):
    final = tmp_path / "out"
    final.mkdir()
    (final / "a.txt").write_text("old")
    # A real process dies (os._exit, like SIGKILL: no cleanup) after moving the old folder away.
    code = (f"import os, sys; sys.path.insert(0, {str(SRC)!r})\n"
            "from pathlib import Path\nimport calibrl.utils.atomic as atomic\n"
            "real = os.replace\ncalls = []\n"
            "def replace(a, b):\n    calls.append(a)\n    real(a, b)\n"
            "    if len(calls) == 1: os._exit(9)\n"
            "atomic.os.replace = replace\n"
            f"with atomic.atomic_dir(Path({str(final)!r})) as tmp:\n"
            "    (tmp / 'a.txt').write_text('new')\n")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 9
    assert not final.exists() and len(list(tmp_path.iterdir())) == 2  # .old-out.PID, .tmp-out.PID
    recover(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert (final / "a.txt").read_text() == "old"


def test_stale_temporaries_are_cleaned_and_live_ones_kept(tmp_path):
    dead, live = _dead_pid(), os.getppid()  # the parent: alive, and not this writer
    for name in (f".tmp-train.parquet.{dead}", ".tmp-train.parquet", ".train.parquet.x1.tmp",
                 f".tmp-train.parquet.{live}"):
        (tmp_path / name).write_text("partial")
    (tmp_path / f".tmp-ckpt.{dead}").mkdir()
    write_examples(tmp_path / "train.parquet", _examples(4))
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [f".tmp-ckpt.{dead}", f".tmp-train.parquet.{live}", "train.parquet"]
    recover(tmp_path)  # every name
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".tmp-train.parquet.{live}",
                                                          "train.parquet"]


def test_an_exception_inside_atomic_dir_keeps_the_old_folder(tmp_path):
    final = tmp_path / "eval"
    with atomic_dir(final) as tmp:
        (tmp / "metrics.json").write_text("1")
    with pytest.raises(RuntimeError), atomic_dir(final) as tmp:
        (tmp / "metrics.json").write_text("2")
        raise RuntimeError
    assert (final / "metrics.json").read_text() == "1"
    assert [p.name for p in tmp_path.iterdir()] == ["eval"]


def test_lock_refuses_a_second_owner_naming_its_pid(tmp_path):
    lock = RunLock.acquire(tmp_path / "run")
    with pytest.raises(UserError, match=rf"in use by process {os.getpid()} on "):
        RunLock.acquire(tmp_path / "run")
    lock.release()
    RunLock.acquire(tmp_path / "run").release()
    assert not any(tmp_path.iterdir())  # the lock file goes with its owner


def test_lock_held_by_another_process_and_a_dead_ones_lock(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(SRC)!r})\n"
         "from pathlib import Path\nfrom calibrl.utils.run_dir import RunLock\n"
         f"RunLock.acquire(Path({str(tmp_path / 'run')!r}))\nprint('held', flush=True)\n"
         "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(UserError, match=rf"process {holder.pid} on"):
            RunLock.acquire(tmp_path / "run")
    finally:
        holder.kill()  # SIGKILL: the lock file stays, naming a dead process
        holder.wait()
    assert str(holder.pid) in (tmp_path / ".run.lock").read_text()
    RunLock.acquire(tmp_path / "run").release()


@pytest.mark.parametrize("holds,resume,overwrite,must_exist,expected", [
    (True, False, False, False, "already holds a run"),
    (False, True, False, True, "nothing to resume"),
    (True, True, True, True, "exclude each other"),
])
def test_run_dir_rules_refuse(tmp_path, holds, resume, overwrite, must_exist, expected):
    with pytest.raises(UserError, match=expected):
        plan_run_dir(tmp_path, holds_run=holds, resume=resume, overwrite=overwrite,
                     must_exist=must_exist)


def test_run_dir_rules_decide_where_to_write(tmp_path):
    run = tmp_path / "run"
    assert plan_run_dir(run, holds_run=False, resume=False, overwrite=False,
                        must_exist=False) == (run, False)
    assert plan_run_dir(run, holds_run=True, resume=True, overwrite=False,
                        must_exist=True) == (run, True)
    staged, resuming = plan_run_dir(run, holds_run=True, resume=False, overwrite=True,
                                    must_exist=False)
    assert staged.parent == tmp_path and staged.name.startswith(".tmp-run") and not resuming
