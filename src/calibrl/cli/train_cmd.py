"""`calibrl train --config FILE [key=value ...]`."""

from __future__ import annotations

from pathlib import Path

import typer


def train(
    overrides: list[str] = typer.Argument(None, help="Config overrides as dotted key=value, "
                                          "e.g. optim.lr=1e-5 algorithm.mode=rlvr."),
    config: Path = typer.Option(None, "--config", "-c", help="YAML config file."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint "
                                "of the run directory (same as checkpoint.resume=auto)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a run directory that "
                                   "already holds a run (same as checkpoint.overwrite=true)."),
) -> None:
    """Train with RL (two-turn RLCR, single-turn RLCR or RLVR) from one config."""
    from calibrl.training.config import load_config
    from calibrl.training.trainer import Trainer

    items = list(overrides or [])
    if resume:
        items.append("checkpoint.resume=auto")
    if overwrite:
        items.append("checkpoint.overwrite=true")
    Trainer(load_config(config, items)).train()
