"""Run `calibrl sft` before the lead registers it in `calibrl.cli.main` (same flags, same errors).

    .venv/bin/python benchmarks/sft/sft_cli.py --data ... --out ... [options]
"""

from __future__ import annotations

import sys

import typer

from calibrl.cli.sft_cmd import sft
from calibrl.errors import UserError

if __name__ == "__main__":
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(sft)
    try:
        app(standalone_mode=False)
    except UserError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(2)
