"""Running the `calibrl` command inside a test: its exit code, as a shell would see it."""

from __future__ import annotations

from calibrl.cli.main import main


def run(argv: list[str]) -> int:
    """Exit code of `calibrl <argv>` (0 when it returns normally)."""
    try:
        main(argv)
    except SystemExit as ex:
        return ex.code
    return 0
