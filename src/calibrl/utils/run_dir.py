"""One process per run directory, and no run replaced or continued by accident.

`open_run_dir` is how `train` and `sft` take their output folder:

- a lock (`.NAME.lock` beside the folder) keeps a second process out; it names the owner's pid
  and host. The lock is an `flock`, which the kernel drops when its process dies, so the lock of
  a killed run (even `kill -9`) is stale at once and the next run takes it;
- what a killed writer left beside or inside the folder is cleaned (`atomic.recover`);
- a folder that already holds a run is continued only with `resume` and replaced only with
  `overwrite`; anything else is a `UserError`. A replacing run is written to a staging folder
  and swapped in by `commit`, so a kill leaves the old run as it was.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from calibrl.errors import UserError
from calibrl.utils.atomic import recover, staging_path, swap_in


class RunLock:
    """An exclusive lock on `target` held through the file `.NAME.lock` beside it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self._fd = path, fd

    @classmethod
    def acquire(cls, target: Path) -> RunLock:
        """Take the lock or raise `UserError` naming the process that holds it."""
        target = Path(target).absolute()
        path = target.with_name(f".{target.name}.lock")
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = os.pread(fd, 200, 0).decode(errors="replace").split()
                os.close(fd)
                who = (f"process {owner[0]} on {owner[1]}" if len(owner) >= 2
                       else "another process")
                raise UserError(f"{target} is in use by {who} (lock {path}); wait for it to "
                                "finish or stop it") from None
            if _same_file(fd, path):
                break
            os.close(fd)  # the owner released and removed it between our open and flock: retry
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self._fd < 0:
            return
        self.path.unlink(missing_ok=True)  # before unlocking: a waiter then sees a new file
        os.close(self._fd)
        self._fd = -1


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


@dataclass
class RunDir:
    """A run's folder: `final` when done, `work` while written (a staging folder when it
    replaces an earlier run), and whether the run continues the one already there."""

    final: Path
    work: Path
    resuming: bool
    lock: RunLock | None = None
    keep: Callable[[str], bool] | None = None

    @property
    def staged(self) -> bool:
        return self.work != self.final

    def commit(self) -> None:
        """Publish a replacing run (one swap); a run written in place needs nothing."""
        if self.staged and self.work.exists():
            swap_in(self.work, self.final, keep=self.keep)

    def close(self, *, failed: bool = False) -> None:
        """Release the lock; a replacing run that failed leaves the old run, not a half one."""
        if failed and self.staged and self.lock is not None:
            shutil.rmtree(self.work, ignore_errors=True)
        if self.lock is not None:
            self.lock.release()
            self.lock = None


def plan_run_dir(final: Path, *, holds_run: bool, resume: bool, overwrite: bool,
                 must_exist: bool) -> tuple[Path, bool]:
    """(folder to write, whether the run continues the one there). `must_exist`: `resume` asks
    for an earlier run (`--resume`); without it, `resume` may also start a new folder (a run
    continued from a checkpoint elsewhere)."""
    if resume and overwrite:
        raise UserError("resume and overwrite exclude each other: continue the run or replace it")
    if must_exist and not holds_run:
        raise UserError(f"nothing to resume: {final} holds no run")
    if holds_run and not (resume or overwrite):
        raise UserError(f"{final} already holds a run; pass --resume to continue it or "
                        "--overwrite to replace it")
    if holds_run and overwrite:
        return staging_path(final, with_pid=False), False
    return final, resume and holds_run


def open_run_dir(final: Path, *, holds_run: Callable[[Path], bool], resume: bool,
                 overwrite: bool, must_exist: bool, main: bool = True,
                 keep: Callable[[str], bool] | None = None) -> RunDir:
    """Lock `final` (main process only), clean what a killed run left, and decide where this run
    writes. Other processes of a multi-process run call it with `main=False` after the main
    process did (they neither lock nor clean, and reach the same decision)."""
    final = Path(final).absolute()
    lock = RunLock.acquire(final) if main else None
    try:
        if main:
            recover(final.parent, [final.name])
            recover(final)
        work, resuming = plan_run_dir(final, holds_run=holds_run(final), resume=resume,
                                      overwrite=overwrite, must_exist=must_exist)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    return RunDir(final, work, resuming, lock, keep)
