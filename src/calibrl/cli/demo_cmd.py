"""`calibrl demo`: the whole system on CPU with the tiny model, from configs/demo.yaml."""

from __future__ import annotations

from pathlib import Path

import typer

from calibrl.cli.options import (
    OptionMap,
    print_config_and_exit,
    print_config_option,
)
from calibrl.settings.demo import DemoSettings

DEMO = OptionMap(DemoSettings, keys={"out": "out_dir"}, extra=frozenset({"overwrite"}),
                 example="sft.steps=300 rl.optim.total_steps=10")


def demo(
    ctx: typer.Context,
    overrides: list[str] = DEMO.overrides_argument(),
    config: Path = typer.Option(None, "--config", "-c", help="The demo recipe (default: "
                                "configs/demo.yaml of the calibrl checkout); options and "
                                "key=value overrides apply on top of it."),
    out: Path = DEMO.option("out", "--out"),
    seed: int = DEMO.option("seed", "--seed"),
    print_config: bool = print_config_option(),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the demo already in "
                                   "OUT (its stages' folders and report)."),
) -> None:
    """Run the CPU demo and print where its output is."""
    from calibrl.demo.pipeline import load_demo_settings, run_demo

    settings = load_demo_settings(config, overrides, DEMO.given(ctx))
    print_config_and_exit(ctx, settings)
    run_demo(settings, overwrite=overwrite)
