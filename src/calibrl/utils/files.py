"""Reading user files and checking output paths, with failures as one-line `UserError`s.

A config or traces file in the wrong encoding, an output folder that is a file, read-only or on a
full disk: each is something the user fixes, so each should read as one line naming the path,
not as a traceback from deep inside a writer.
"""

from __future__ import annotations

import errno
import shutil
import tempfile
from pathlib import Path

from calibrl.errors import UserError

# Errors of the file system the user can fix (a full disk, a read-only mount, a file where a folder
# should be), as opposed to a bug such as a missing file that calibrl itself should have written.
USER_FIXABLE_ERRNOS = frozenset({
    errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM,
    errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENAMETOOLONG,
})


def read_text_file(path: str | Path, what: str) -> str:
    """The UTF-8 text of `path`; `UserError` naming `what` and the path if it cannot be read."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{what} {path} is not UTF-8 text (byte {err.start}: "
                        f"{err.object[err.start:err.start + 1]!r})") from None
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


def check_output_file(path: str | Path, what: str) -> None:
    """Refuse an output file path whose folder cannot be written, or that is a folder."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder, expected a file name")
    check_output_dir(path.parent, what)
