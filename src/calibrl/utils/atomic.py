"""Write a directory or file so that readers see all of it or none of it.

A new version is written beside its destination under `.tmp-NAME.PID` and renamed into place.
Replacing a directory takes two renames (old -> `.old-NAME.PID`, new -> NAME); a process killed
between them leaves the old version under its `.old-` name, and `recover` renames it back. So
after `recover` a destination holds its old version or its new one, never a mix, and no
temporary is left over. Temporaries carry the writer's pid so that a live writer's are never
taken for stale ones.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from calibrl.errors import UserError
from calibrl.utils.write_errors import write_error

_TMP, _OLD = ".tmp-", ".old-"


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _parse(entry: str) -> tuple[str, str, int | None] | None:
    """`.tmp-NAME.PID` -> (".tmp-", NAME, PID); a name without pid (older calibrl) -> pid None."""
    for prefix in (_TMP, _OLD):
        if entry.startswith(prefix):
            base, _, pid = entry[len(prefix):].rpartition(".")
            if pid.isdigit() and base:
                return prefix, base, int(pid)
            return prefix, entry[len(prefix):], None
    return None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def recover(parent: Path, names: Collection[str] | None = None) -> None:
    """Clean what killed writers left in `parent` (only for `names` when given): a half-swapped
    old version goes back in place, every other temporary of a dead writer is deleted."""
    parent = Path(parent)
    if not parent.is_dir():
        return
    for entry in sorted(parent.iterdir()):
        parsed = _parse(entry.name)
        if parsed is None:
            # Older calibrl wrote parquet files through `.NAME.XXXX.tmp` temporaries.
            legacy = entry.name.startswith(".") and entry.name.endswith(".tmp")
            if legacy and (names is None or any(entry.name.startswith(f".{n}.") for n in names)):
                _remove(entry)
            continue
        prefix, base, pid = parsed
        if (names is not None and base not in names) or (pid is not None and pid_alive(pid)):
            continue
        if prefix == _OLD and not (parent / base).exists():
            os.replace(entry, parent / base)
        else:
            _remove(entry)


def fsync_tree(path: Path) -> None:
    """Flush every file under `path`, then the folders, so a rename publishes written bytes."""
    path = Path(path)
    if path.is_file():
        _fsync(path, os.O_RDONLY)
        return
    for root, _, files in os.walk(path):
        for name in files:
            _fsync(Path(root) / name, os.O_RDONLY)
        _fsync(Path(root), os.O_RDONLY)


def _fsync(path: Path, flags: int) -> None:
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync folders
    finally:
        os.close(fd)


def _carry_over(old: Path, new: Path, keep: Callable[[str], bool]) -> None:
    """Hard-link (or copy) into `new` the entries of `old` that `keep` accepts and `new` lacks."""
    for entry in old.iterdir():
        target = new / entry.name
        if target.exists() or target.is_symlink() or _parse(entry.name) or not keep(entry.name):
            continue
        if entry.is_symlink():
            os.symlink(os.readlink(entry), target)
        elif entry.is_dir():
            shutil.copytree(entry, target, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(entry, target)


def _link_or_copy(src: str | Path, dst: str | Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def swap_in(tmp: Path, final: Path, *, keep: Callable[[str], bool] | None = None) -> None:
    """Make the finished folder `tmp` the new `final`; with `keep`, the old `final`'s entries it
    accepts (and `tmp` lacks) are carried over, so files that are not this output survive."""
    tmp, final = Path(tmp), Path(final)
    fsync_tree(tmp)
    if final.exists():
        if keep is not None:
            _carry_over(final, tmp, keep)
        old = final.with_name(f"{_OLD}{final.name}.{os.getpid()}")
        os.replace(final, old)
        os.replace(tmp, final)
        _fsync(final.parent, os.O_RDONLY)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)
        _fsync(final.parent, os.O_RDONLY)


def staging_path(final: Path, *, with_pid: bool = True) -> Path:
    """Where a new version of `final` is written before `swap_in` (`with_pid=False` for a
    destination that a lock already keeps to one writer, so every process can name it)."""
    final = Path(final)
    return final.with_name(f"{_TMP}{final.name}" + (f".{os.getpid()}" if with_pid else ""))


@contextlib.contextmanager
def atomic_dir(final: Path, *, own: Collection[str] | None = None) -> Iterator[Path]:
    """Yield an empty temporary sibling folder; on success it replaces `final` in one swap.

    `own=None`: the folder is the output and its old contents go. `own=names`: the output is
    those entries of a folder that may hold other files, which are carried over unchanged.
    """
    final = Path(final).absolute()
    if Path.cwd().is_relative_to(final):
        raise UserError(f"cannot replace {final} as a whole: it holds the working directory; "
                        "write into a folder below it")
    recover(final.parent, [final.name])
    tmp = staging_path(final)
    try:
        tmp.mkdir(parents=True)
        yield tmp
        swap_in(tmp, final, keep=None if own is None else (lambda name: name not in own))
    except BaseException as err:
        failure = write_error(err, final, tmp)  # before the partial files free their space
        shutil.rmtree(tmp, ignore_errors=True)
        if failure is None:
            raise
        raise failure from err


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success the written file replaces `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    recover(path.parent, [path.name])
    tmp = staging_path(path)
    try:
        yield tmp
        _fsync(tmp, os.O_RDONLY)
        os.replace(tmp, path)
    except BaseException as err:
        failure = write_error(err, path, tmp)
        with contextlib.suppress(OSError):  # on a read-only disk even this unlink fails
            tmp.unlink(missing_ok=True)
        if failure is None:
            raise
        raise failure from err


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file and a rename."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
