"""`calibrl train --config FILE [key=value ...]`."""

from __future__ import annotations

from pathlib import Path

import typer

from calibrl.cli.options import (
    OptionMap,
    config_option,
    print_config_option,
)
from calibrl.settings.train import TrainSettings

# Every setting of a run is a key=value override (`optim.lr=1e-5`); `--resume` and
# `--overwrite` are shortcuts.
TRAIN = OptionMap(TrainSettings, extra=frozenset({"resume", "overwrite"}),
                  example="optim.lr=1e-4 algorithm.mode=rlvr")


def train(
    ctx: typer.Context,
    overrides: list[str] = TRAIN.overrides_argument(),
    config: Path = config_option(),
    print_config: bool = print_config_option(),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint "
                                "of the run directory (same as checkpoint.resume=auto)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a run directory that "
                                   "already holds a run (same as checkpoint.overwrite=true)."),
) -> None:
    """Train with RL (two-turn RLCR, single-turn RLCR or RLVR) from one config."""
    then = (["checkpoint.resume=auto"] if resume else []) + (
        ["checkpoint.overwrite=true"] if overwrite else [])
    cfg = TRAIN.load(ctx, then=then)
    # Imported after the settings are read: a bad key or --print-config pays for no torch.
    from calibrl.evaluation.during_training import held_out_evaluator
    from calibrl.training.trainer import Trainer

    Trainer(cfg, evaluator=held_out_evaluator(cfg) if cfg.data.eval_path else None).train()
