"""Reading user files and checking output paths, with failures as one-line `UserError`s.

A config or traces file in the wrong encoding, an output folder that is a file, read-only or on a
full disk: each is something the user fixes, so each should read as one line naming the path,
not as a traceback from deep inside a writer.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from calibrl.errors import UserError, already_holds, missing_file

# Errors of the file system the user can fix (a full disk, a read-only mount, a file where a folder
# should be), as opposed to a bug such as a missing file that calibrl itself should have written.
USER_FIXABLE_ERRNOS = frozenset({
    errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM,
    errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENAMETOOLONG,
})


def require_file(path: str | Path) -> Path:
    """`path`, when it is a file; else the one error every command gives for a missing input."""
    path = Path(path)
    if not path.is_file():
        raise missing_file(path)
    return path


def read_text_file(path: str | Path, what: str) -> str:
    """The UTF-8 text of `path`; `UserError` naming `what` and the path if it cannot be read."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{what} {path} is not UTF-8 text (byte {err.start}: "
                        f"{err.object[err.start:err.start + 1]!r})") from None
    except FileNotFoundError:
        raise missing_file(path) from None
    except OSError as err:
        raise UserError(f"cannot read {what} {path}: {err.strerror or err}") from None


def describe_os_error(err: OSError) -> str | None:
    """One line for a file-system error the user can fix, or None for any other error."""
    if err.errno not in USER_FIXABLE_ERRNOS:
        return None
    where = err.filename if err.filename is not None else "an output file"
    return f"cannot write {where}: {err.strerror or err}"


def check_output_dir(path: str | Path, what: str) -> None:
    """Refuse, before any work, an output folder that cannot be created or written.

    Creates nothing that stays: the nearest existing folder on the way to `path` gets a
    temporary folder, removed at once, as the proof that it is writable.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UserError(f"{what} {path} exists and is not a folder")
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{what} {path}: {existing} is a file, not a folder")
    try:
        shutil.rmtree(tempfile.mkdtemp(prefix=".calibrl-write-check-", dir=existing))
    except OSError as err:
        raise UserError(f"{what} {path}: cannot write in {existing} ({err.strerror or err})"
                        ) from None


def refuse_to_replace(folder: str | Path, names: Sequence[str], *, overwrite: bool) -> None:
    """Refuse, before any work, to replace the entries `names` of `folder` without `overwrite`:
    a second run into one folder must not silently replace the first one's output."""
    held = [name for name in names if (Path(folder) / name).exists()]
    if held and not overwrite:
        raise already_holds(folder, ", ".join(held), them=len(held) > 1)


def check_output_file(path: str | Path, what: str) -> None:
    """Refuse an output file path whose folder cannot be written, or that is a folder."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder, expected a file name")
    check_output_dir(path.parent, what)
