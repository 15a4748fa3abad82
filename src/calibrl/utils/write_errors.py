"""A failed write as one `OSError` that names its destination and the cause.

A full disk, a quota or a read-only mount reaches calibrl in several shapes: an `OSError` without
a file name (a buffered write flushed later), one naming a temporary file the user never asked
for, torch.save's `RuntimeError: [enforce fail at inline_container.cc:...] unexpected pos ...`
(torch's writer drops the errno) and safetensors' `I/O error: No space left on device (os error
28)`. `write_error` turns each into `OSError(errno, strerror, destination)`, which the command
line prints as "cannot write DESTINATION: No space left on device" (exit code 2). Anything else is
left alone: a bug keeps its traceback.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from calibrl.utils.files import USER_FIXABLE_ERRNOS

_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")  # std::io::Error's text (safetensors)
# What torch's zip writer says when a write came up short; it keeps no errno.
_TORCH_SHORT_WRITE = ("unexpected pos", "file write failed")
PROBE_BYTES = 1 << 20


def probe_write(folder: Path) -> int | None:
    """The errno a 1 MiB write in `folder` meets now, or None when it succeeds.

    Asked after torch failed a write: the partial file it left still takes its space, so a full
    disk (or quota) is still full, and a read-only one still read-only. The probe file is a
    `.tmp-*.PID` temporary, which `calibrl.utils.atomic.recover` cleans if the process dies.
    """
    path = Path(folder) / f".tmp-write-probe.{os.getpid()}"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as err:
        return err.errno
    try:
        block = bytes(1 << 16)
        for _ in range(PROBE_BYTES // len(block)):
            os.write(fd, block)
        os.fsync(fd)  # file systems that allocate late report a full disk only here
    except OSError as err:
        return err.errno
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return None


def _cause(err: BaseException, folder: Path) -> int | None:
    """The errno behind `err` when it is a failed write, else None."""
    if isinstance(err, OSError):
        return err.errno
    if not isinstance(err, Exception):
        return None  # KeyboardInterrupt, SystemExit, a stop request
    text = str(err)
    match = _RUST_OS_ERROR.search(text)
    if match:
        return int(match.group(1))
    if isinstance(err, RuntimeError) and any(s in text for s in _TORCH_SHORT_WRITE):
        return probe_write(folder)
    return None


def _inside(name: str | bytes | None, folder: Path | None) -> bool:
    if name is None or folder is None:
        return False
    return Path(os.fsdecode(name)).absolute().is_relative_to(Path(folder).absolute())


def write_error(err: BaseException, destination: Path, temporary: Path | None = None
                ) -> OSError | None:
    """`OSError(errno, strerror, destination)` when `err` is a write that failed for a reason the
    user can fix (full disk, quota, read-only, permissions), else None.

    `temporary`: where the output was being written (a folder or file beside `destination`);
    an `OSError` naming a file in there is reported under `destination`, while one naming some
    other path already says where it failed and is left alone.
    """
    destination = Path(destination)
    if isinstance(err, OSError) and err.filename is not None and not _inside(err.filename,
                                                                             temporary):
        return None
    folder = temporary if temporary is not None and Path(temporary).is_dir() else None
    code = _cause(err, folder or destination.parent)
    if code not in USER_FIXABLE_ERRNOS:
        return None
    return OSError(code, os.strerror(code), str(destination))


@contextlib.contextmanager
def naming_failed_writes(destination: Path, temporary: Path | None = None) -> Iterator[None]:
    """Re-raise a failed write in the block as `write_error`'s one-line `OSError`."""
    try:
        yield
    except Exception as err:
        failure = write_error(err, destination, temporary)
        if failure is None:
            raise
        raise failure from err
