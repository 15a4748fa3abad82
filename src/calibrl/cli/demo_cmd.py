"""`calibrl demo`: the whole system on CPU with the tiny model."""

from __future__ import annotations

from pathlib import Path

import typer


def demo(
    out: Path = typer.Option(Path("outputs/demo"), help="Where the demo writes everything."),
    seed: int = typer.Option(0, help="Seed for data, training and sampling."),
) -> None:
    """Run the CPU demo and print where its output is."""
    from calibrl.demo.pipeline import DemoSettings, run_demo

    run_demo(DemoSettings(out_dir=out, seed=seed))
