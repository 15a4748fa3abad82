"""`calibrl eval` and `calibrl compare`."""

from __future__ import annotations

from pathlib import Path

import typer

from calibrl.protocol.modes import DEFAULT_MODE, mode_names


def evaluate(
    model: str = typer.Option(..., "--model", help="Saved model directory (or 'tiny')."),
    data: Path = typer.Option(..., "--data", help="Parquet/JSON(L) file to evaluate on."),
    mode: str = typer.Option(DEFAULT_MODE, "--mode", help=" | ".join(mode_names()) + "."),
    samples: int = typer.Option(1, "--samples", help="Answers sampled per prompt."),
    temperature: float = typer.Option(0.0, "--temperature", help="0 = greedy."),
    out: Path = typer.Option(..., "--out", help="Output directory."),
    max_examples: int = typer.Option(None, "--max-examples", help="Evaluate the first N only."),
    max_answer_tokens: int = typer.Option(128, help="Max new tokens of an answer."),
    max_confidence_tokens: int = typer.Option(48, help="Max new tokens of a confidence turn."),
    seed: int = typer.Option(0, help="Sampling seed."),
    name: str = typer.Option(None, help="Run name in tables (default: the output folder)."),
    confidence_question: str = typer.Option(
        None, help="Turn-2 question (two_turn); default: the one calibrl's SFT and RL ask "
        "unless configured otherwise. Ask what the model was trained with."),
) -> None:
    """Generate, verify and score calibration: accuracy, ECE, Brier, AUROC, AURC and figures."""
    from calibrl.evaluation.compare import group_table, metrics_table
    from calibrl.evaluation.run import EvalSettings
    from calibrl.evaluation.run import evaluate as run

    if not data.is_file():
        from calibrl.errors import UserError

        raise UserError(f"data file not found: {data}")
    settings = EvalSettings(mode=mode, samples=samples, temperature=temperature,
                            max_answer_tokens=max_answer_tokens,
                            max_confidence_tokens=max_confidence_tokens,
                            max_examples=max_examples, seed=seed,
                            **({"confidence_question": confidence_question}
                               if confidence_question else {}))
    metrics = run(model, data, out, settings, name=name)
    row = {**metrics, "name": name or out.name, "mode": mode}
    typer.echo(metrics_table([row]))
    by_group = group_table([row])
    if by_group is not None:
        typer.echo(by_group)
    typer.echo(f"wrote {out.resolve()}")


def compare(
    runs: list[Path] = typer.Argument(..., help="Evaluated run directories (with metrics.json)."),
    plot: Path = typer.Option(None, help="Also write an overlaid reliability diagram here."),
    risk_coverage_plot: Path = typer.Option(
        None, "--risk-coverage-plot", help="Also write overlaid risk-coverage curves here."),
) -> None:
    """Markdown tables of several evaluated runs (overall and per difficulty group), and
    optionally overlaid reliability diagrams and risk-coverage curves."""
    from calibrl.evaluation.compare import compare_runs

    typer.echo(compare_runs(runs, plot_path=plot, risk_coverage_path=risk_coverage_plot))
