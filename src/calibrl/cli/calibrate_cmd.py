"""`calibrl calibrate`: the confidence warm-up on the model's own graded answers."""

from __future__ import annotations

from pathlib import Path

import typer

from calibrl.cli.options import (
    OptionMap,
    config_option,
    print_config_option,
)
from calibrl.settings.calibrate import CalibrateSettings

CALIBRATE = OptionMap(CalibrateSettings, example="prompts=200 answer_weight=1.0")


def calibrate(
    ctx: typer.Context,
    overrides: list[str] = CALIBRATE.overrides_argument(),
    config: Path = config_option(),
    print_config: bool = print_config_option(),
    data: Path = CALIBRATE.option("data", "--data"),
    model: str = CALIBRATE.option("model", "--model"),
    out: Path = CALIBRATE.option("out", "--out"),
    prompts: int = CALIBRATE.option("prompts", "--prompts"),
    answers_per_prompt: int = CALIBRATE.option("answers_per_prompt", "--answers-per-prompt"),
    target: str = CALIBRATE.option("target", "--target"),
    loss: str = CALIBRATE.option("loss", "--loss"),
    analysis: str = CALIBRATE.option("analysis", "--analysis"),
    reanswers: int = CALIBRATE.option("reanswers", "--reanswers"),
    steps: int = CALIBRATE.option("steps", "--steps"),
    lr: float = CALIBRATE.option("lr", "--lr"),
    confidence_question: str = CALIBRATE.option("confidence_question", "--confidence-question"),
    bf16: bool = CALIBRATE.option("bf16", "--bf16/--no-bf16"),
    device: str = CALIBRATE.option("device", "--device"),
    seed: int = CALIBRATE.option("seed", "--seed"),
    overwrite: bool = CALIBRATE.option("overwrite", "--overwrite"),
) -> None:
    """Teach a warmed-up model to state how likely its answer is right: it answers training
    prompts, the task grades them, and its turn-2 confidence is tuned with a proper scoring
    loss; saves OUT/model."""
    settings = CALIBRATE.load(ctx)
    # Imported here so `calibrl --help` does not pay for torch and transformers.
    from calibrl.training.calibrate import run_calibrate

    summary = run_calibrate(settings)
    before, after = summary["expected_before"], summary["expected_after"]
    typer.echo(
        f"graded {summary['answers']} answers to {summary['prompts']} prompts (accuracy "
        f"{summary['accuracy']:.3f}); trained {summary['steps']} steps (target "
        f"{summary['target']}, loss {summary['loss']}) in {summary['seconds']:.0f} s; expected "
        f"confidence right/wrong {_pair(before)} -> {_pair(after)}; saved {summary['model_dir']}")


def _pair(means: dict) -> str:
    return "/".join("-" if v is None else f"{v:.2f}" for v in (means["right"], means["wrong"]))
