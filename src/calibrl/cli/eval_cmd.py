"""`calibrl eval` and `calibrl compare`."""

from __future__ import annotations

from pathlib import Path

import typer

from calibrl.cli.options import (
    OptionMap,
    config_option,
    print_config_option,
)
from calibrl.protocol.modes import mode_names
from calibrl.settings.eval import EvalSettings

EVAL = OptionMap(EvalSettings, example="samples=4 temperature=0.7")


def evaluate(
    ctx: typer.Context,
    overrides: list[str] = EVAL.overrides_argument(),
    config: Path = config_option(),
    print_config: bool = print_config_option(),
    model: str = EVAL.option("model", "--model"),
    data: list[Path] = EVAL.option("data", "--data"),
    mode: str = EVAL.option("mode", "--mode", more_help=" (" + " | ".join(mode_names()) + ")"),
    samples: int = EVAL.option("samples", "--samples"),
    temperature: float = EVAL.option("temperature", "--temperature"),
    top_p: float = EVAL.option("top_p"),
    top_k: int = EVAL.option("top_k"),
    out: Path = EVAL.option("out", "--out"),
    max_examples: int = EVAL.option("max_examples", "--max-examples"),
    max_answer_tokens: int = EVAL.option("max_answer_tokens"),
    max_confidence_tokens: int = EVAL.option("max_confidence_tokens"),
    batch_prompts: int = EVAL.option("batch_prompts"),
    seed: int = EVAL.option("seed"),
    bootstrap: int = EVAL.option("bootstrap"),
    name: str = EVAL.option("name"),
    confidence_question: str = EVAL.option("confidence_question"),
    overwrite: bool = EVAL.option("overwrite", "--overwrite"),
) -> None:
    """Generate, verify and score calibration: accuracy, ECE, Brier, AUROC, AURC and figures."""
    from calibrl.evaluation.compare import tables_text
    from calibrl.evaluation.run import evaluate as run
    from calibrl.utils.files import require_file

    settings = EVAL.load(ctx)
    for path in settings.data:
        require_file(path)  # every file before the model loads
    out_dir = Path(settings.out)
    data = settings.data[0] if len(settings.data) == 1 else settings.data
    metrics = run(settings.model, data, out_dir, settings, name=settings.name,
                  overwrite=settings.overwrite)
    rows = [metrics] if isinstance(metrics, dict) else metrics
    if len(rows) == 1:
        rows = [{**metrics, "name": settings.name or out_dir.name, "mode": settings.mode}]
    typer.echo(tables_text(rows))
    typer.echo(f"wrote {out_dir.resolve()}")


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
