"""Side-by-side comparison of evaluated runs: a markdown table and an overlaid reliability diagram.

Reads only the files `calibrl.evaluation.report` writes (`metrics.json`, `bins.json`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calibrl.errors import UserError
from calibrl.evaluation.plots import plot_reliability_overlay
from calibrl.evaluation.report import load_bins, load_metrics

# (metrics.json key, column header, format). Arrows say which direction is better.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("count", "n", "{:d}"),
    ("accuracy", "accuracy ↑", "{:.4f}"),
    ("ece", "ECE ↓", "{:.4f}"),
    ("brier", "Brier ↓", "{:.4f}"),
    ("auroc", "AUROC ↑", "{:.4f}"),
    ("mean_confidence", "mean conf", "{:.4f}"),
    ("unparsable_confidence_rate", "unparsable conf", "{:.4f}"),
    ("format_failure_rate", "format fail", "{:.4f}"),
    ("mean_answer_len", "answer len", "{:.1f}"),
    ("mean_conf_len", "conf len", "{:.1f}"),
)
NOT_APPLICABLE = "n/a"


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return NOT_APPLICABLE
    if fmt == "{:d}":
        return fmt.format(int(value))
    return fmt.format(float(value))


def _text(value: str) -> str:
    """A name or mode safe inside a table cell."""
    return value.replace("|", "\\|").replace("\n", " ")


def _check_dirs(run_dirs: Sequence[str | Path]) -> list[Path]:
    if not run_dirs:
        raise UserError("no runs to compare")
    return [Path(d) for d in run_dirs]


def metrics_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown table, one row per metrics dict (as `load_metrics` returns), in order."""
    header = ["run", "mode", *(title for _, title, _ in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---", "---"] + ["---:"] * len(COLUMNS)) + "|"]
    for row in rows:
        cells = [_text(row["name"]), _text(row["mode"])]
        cells += [_cell(row[key], fmt) for key, _, fmt in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_compare(run_dirs: Sequence[str | Path], out_path: str | Path) -> Path | None:
    """Overlaid reliability diagram of the runs that have confidences; None when none has."""
    runs = {}
    for run_dir in _check_dirs(run_dirs):
        bins = load_bins(run_dir)
        if any(b.count for b in bins):
            label = load_metrics(run_dir)["name"]
            while label in runs:  # two runs with one name must both stay visible
                label += "'"
            runs[label] = bins
    if not runs:
        return None
    return plot_reliability_overlay(runs, out_path, title="Reliability of compared runs")


def compare_runs(run_dirs: Sequence[str | Path], *, plot_path: str | Path | None = None) -> str:
    """Markdown table of the runs' metrics; also the overlaid reliability plot if `plot_path`.

    Raises `UserError` naming the file when a run's `metrics.json` (or, with a plot,
    `bins.json`) is missing or malformed.
    """
    dirs = _check_dirs(run_dirs)
    table = metrics_table([load_metrics(d) for d in dirs])
    if plot_path is not None:
        plot_compare(dirs, plot_path)
    return table
