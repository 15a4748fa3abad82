"""`calibrl train --config FILE [key=value ...]`."""

from __future__ import annotations

from pathlib import Path

import typer

from calibrl.cli.options import OptionMap, config_option, overrides_argument
from calibrl.settings.train import TrainSettings

# Every setting of a run is a key=value override (`optim.lr=1e-5`); `--resume` is a shortcut.
TRAIN = OptionMap(TrainSettings, extra=frozenset({"resume"}))


def train(
    ctx: typer.Context,
    overrides: list[str] = overrides_argument(),
    config: Path = config_option(),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint "
                                "of the run directory (same as checkpoint.resume=auto)."),
) -> None:
    """Train with RL (two-turn RLCR, single-turn RLCR or RLVR) from one config."""
    from calibrl.training.trainer import Trainer

    Trainer(TRAIN.load(ctx, then=["checkpoint.resume=auto"] if resume else [])).train()
