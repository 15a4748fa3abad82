"""The stages every demo recipe shares, each a function of the settings and the stage before
it: the confidence warm-up, an evaluation, two-turn RLCR (and a line describing a model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from calibrl.settings import updated
from calibrl.settings.demo import DemoStages


def stage_calibrate(settings: DemoStages, model_dir: Path) -> Path:
    """The confidence warm-up on the RL prompts (never the test split); returns its model."""
    from calibrl.settings.calibrate import CalibrateSettings
    from calibrl.training.calibrate import run_calibrate

    out = Path(settings.out_dir)
    config = CalibrateSettings.create(**settings.calibrate.model_dump(),
                                      data=str(out / "data/rl.parquet"), model=str(model_dir),
                                      out=str(out / "calibrate"), overwrite=True)
    summary = run_calibrate(config)
    Console().print(
        f"confidence warm-up: {summary['answers']} graded answers to {summary['prompts']} RL "
        f"prompts (accuracy {summary['accuracy']:.3f}), target {summary['target']}, "
        f"{summary['steps']} steps of {summary['loss']}; expected confidence on them, right / "
        f"wrong: {summary['expected_before']['right'] or 0:.2f} / "
        f"{summary['expected_before']['wrong'] or 0:.2f} -> "
        f"{summary['expected_after']['right'] or 0:.2f} / "
        f"{summary['expected_after']['wrong'] or 0:.2f}")
    return Path(summary["model_dir"])


def describe_model(model_dir: Path) -> str:
    """One line: the architecture, its size and its parameter count."""
    from calibrl.models.loading import load_policy
    from calibrl.models.tiny import count_parameters

    config = json.loads((model_dir / "config.json").read_text())
    model, _ = load_policy(str(model_dir))
    return (f"model: {config['model_type']} with {count_parameters(model) / 1e6:.2f}M parameters "
            f"(hidden {config['hidden_size']}, {config['num_hidden_layers']} layers, "
            f"{config['num_attention_heads']} heads, vocabulary {config['vocab_size']}), "
            f"in {model_dir}")


def stage_eval(settings: DemoStages, model_dir: Path, name: str, split: str = "test"
               ) -> dict[str, Any]:
    """Evaluate `model_dir` on the demo's `data/{split}.parquet` into `out_dir/name`."""
    from calibrl.evaluation.run import evaluate

    out = Path(settings.out_dir)
    # The demo decided at its start whether it may replace what its folder holds.
    return evaluate(model_dir, out / f"data/{split}.parquet", out / name, settings.eval,
                    name=name, overwrite=True)


def stage_rl(settings: DemoStages, model_dir: Path) -> Path:
    """Two-turn RLCR from the warmed-up model; returns the final model directory."""
    from calibrl.evaluation.during_training import held_out_evaluator
    from calibrl.training.trainer import Trainer

    out = Path(settings.out_dir)
    config = updated(settings.rl, {"model.path": str(model_dir),
                                   "data.train_path": str(out / "data/rl.parquet"),
                                   "logging.output_dir": str(out), "logging.run_name": "rl",
                                   "checkpoint.overwrite": True})
    evaluator = held_out_evaluator(config) if config.data.eval_path else None
    return Trainer(config, evaluator=evaluator).train()
