"""`calibrl demo`: placeholder until the full pipeline lands (see README)."""

from __future__ import annotations


def demo() -> None:
    """Run the CPU demo."""
    from calibrl.errors import UserError

    raise UserError("demo not built yet")
