"""A real full or read-only disk for tests: a small tmpfs mounted where the tests run as root
and may mount (a container without CAP_SYS_ADMIN may not); `None` elsewhere, where tests fall
back to a write that raises the same error."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def small_disk(where: Path, kib: int) -> Iterator[Path | None]:
    """`where` as a tmpfs of `kib` KiB while the block runs, or None when it cannot be mounted."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or not shutil.which("mount"):
        yield None
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(where)],
                             capture_output=True)
    if mounted.returncode != 0:
        yield None
        return
    try:
        yield where
    finally:
        # Lazy: a failed writer may still hold a file open through the traceback of its error.
        subprocess.run(["umount", "--lazy", str(where)], check=True)


def make_read_only(where: Path) -> None:
    """Remount the tmpfs at `where` read-only (root ignores file modes, not a read-only mount)."""
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)


def fill(where: Path) -> None:
    """Take every free byte of the disk holding `where`."""
    block = bytes(1 << 12)
    with (where / "filler").open("wb", buffering=0) as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(block)
