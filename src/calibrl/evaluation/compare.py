"""Side-by-side comparison of evaluated runs: markdown tables and overlaid figures.

Reads only the files `calibrl.evaluation.report` writes (`metrics.json`, `bins.json`,
`risk_coverage.json`). Runs whose metrics.json has "by_group" get a second, per-group table, and
runs with "baselines" a third: the stated confidence (its headline reading, then the other:
sampled value and expected value, `calibrl.evaluation.stated_value`) against the difficulty
table, the readout and the answer's likelihood (`calibrl.evaluation.baselines`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calibrl.errors import UserError
from calibrl.evaluation.baselines import reading_key
from calibrl.evaluation.bootstrap import CALIBRATED_ECE, LEVEL
from calibrl.evaluation.plots import plot_reliability_overlay, plot_risk_coverage
from calibrl.evaluation.records import EXPECTED, READING_NAMES, SAMPLED
from calibrl.evaluation.report import load_bins, load_metrics, load_risk_coverage
from calibrl.evaluation.summary import UNAVAILABLE
from calibrl.utils.plotting import check_figure_path

# (metrics.json key, column header, format). Arrows say which direction is better.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("count", "n", "{:d}"),
    ("accuracy", "accuracy ↑", "{:.4f}"),
    ("ece", "ECE ↓", "{:.4f}"),
    ("brier", "Brier ↓", "{:.4f}"),
    ("auroc", "AUROC ↑", "{:.4f}"),
    ("within_group_auroc", "within-group AUROC ↑", "{:.4f}"),
    ("aurc", "AURC ↓", "{:.4f}"),
    ("mean_confidence", "mean conf", "{:.4f}"),
    ("unparsable_confidence_rate", "unparsable conf", "{:.4f}"),
    ("format_failure_rate", "format fail", "{:.4f}"),
    ("mean_answer_len", "answer len", "{:.1f}"),
    ("mean_conf_len", "conf len", "{:.1f}"),
)
# The per-group table keeps to accuracy and the headline calibration metrics, and adds the
# answer likelihood's AUROC inside the group (what the model knows, said or not).
GROUP_COLUMNS = tuple(c for c in COLUMNS if c[0] in ("count", "accuracy", "ece", "brier",
                                                     "auroc", "aurc"))
LIKELIHOOD_AUROC = ("likelihood_auroc", "likelihood AUROC ↑", "{:.4f}")
INTERVAL_COLUMNS = tuple(c for c in COLUMNS if c[0] in ("accuracy", "ece", "brier", "auroc",
                                                        "within_group_auroc", "aurc"))
BASELINE_COLUMNS = tuple(c for c in COLUMNS if c[0] in ("ece", "brier", "auroc",
                                                        "within_group_auroc", "aurc"))
NOT_APPLICABLE = "n/a"
EXPECTED_NOTE = (f"{READING_NAMES[EXPECTED].capitalize()}: the mean of the model's distribution "
                 "over the ten tenths where it writes its value, renormalised over them (after "
                 "its own turn 2 up to <confidence>, then '<confidence>0.')")


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


def _table(labels: Sequence[str], columns: Sequence[tuple[str, str, str]],
           rows: Sequence[tuple[Sequence[str], dict[str, Any]]]) -> str:
    """Markdown table: text columns `labels`, then one right-aligned column per metric."""
    header = [*labels, *(title for _, title, _ in columns)]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---"] * len(labels) + ["---:"] * len(columns)) + "|"]
    for texts, metrics in rows:
        cells = [_text(t) for t in texts]
        cells += [_cell(metrics.get(key), fmt) for key, _, fmt in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _unavailable_notes(rows: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """One line per (label, metrics) whose calibration is not available, with the reason (an
    n/a there is no undefined AUROC but a reading not available), or whose confidence is the
    expected value."""
    lines = [f"Calibration not available for {label}: {m[UNAVAILABLE]}.\n"
             for label, m in rows if m.get(UNAVAILABLE)]
    lines += [f"The confidence of {label} is the {READING_NAMES[EXPECTED]}; the sampled value "
              "is beside it in the references.\n"
              for label, m in rows if m.get("confidence_reading") == EXPECTED]
    return "".join(["\n", *lines]) if lines else ""  # a blank line first ends the table


def _extra_columns(rows: Sequence[dict[str, Any]]) -> tuple[tuple[str, str, str], ...]:
    names = sorted({n for r in rows for n in (r.get("extra_scores") or {})})
    return tuple((f"extra:{n}", f"{n} ↑", "{:.4f}") for n in names)


def _with_extras(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, **{f"extra:{n}": v for n, v in (row.get("extra_scores") or {}).items()}}


def metrics_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown table, one row per metrics dict (as `load_metrics` returns), in order; a task's
    extra scores (e.g. token F1) follow accuracy's columns when some run has them."""
    columns = COLUMNS[:2] + _extra_columns(rows) + COLUMNS[2:]
    return (_table(["run", "mode"], columns, [((r["name"], r["mode"]), _with_extras(r))
                                              for r in rows])
            + _unavailable_notes([(r["name"], r) for r in rows]))


def _likelihood(row: dict[str, Any]) -> dict[str, Any] | None:
    return (row.get("baselines") or {}).get("answer_likelihood")


def group_table(rows: Sequence[dict[str, Any]]) -> str | None:
    """Markdown table of each run's "by_group" metrics, run by run; None when no run has any.
    The likelihood column is there when some run has the answer-likelihood baseline."""
    grouped = [((r["name"], label),
                {**m, "likelihood_auroc": ((_likelihood(r) or {}).get("by_group") or {}).get(label)})
               for r in rows for label, m in (r.get("by_group") or {}).items()]
    if not grouped:
        return None
    with_likelihood = any(_likelihood(r) for r in rows)
    # A run not available as a whole says so once, in `metrics_table`'s note.
    notes = [(f"{r['name']} / {label}", m) for r in rows if not r.get(UNAVAILABLE)
             for label, m in (r.get("by_group") or {}).items()]
    return (_table(["run", "group"], GROUP_COLUMNS + ((LIKELIHOOD_AUROC,) if with_likelihood
                                                      else ()), grouped)
            + _unavailable_notes(notes))


def baseline_table(rows: Sequence[dict[str, Any]]) -> str | None:
    """Markdown table: each run's stated confidence (its headline reading, then the other),
    then the difficulty table's, the readout's and the answer likelihood's scores on the same
    answers; None when no run has "baselines"."""
    table_rows, beside = [], []
    for r in rows:
        baselines = r.get("baselines")
        if not baselines:
            continue
        table_rows.append(((r["name"], READING_NAMES[r.get("confidence_reading", SAMPLED)]), r))
        for reading in (SAMPLED, EXPECTED):
            if baselines.get(reading_key(reading)):
                beside.append((f"{r['name']}, {READING_NAMES[reading]}",
                               baselines[reading_key(reading)]))
                table_rows.append(((r["name"], READING_NAMES[reading]), beside[-1][1]))
        table_rows.append(((r["name"], "difficulty table"), baselines["difficulty_table"]))
        if baselines.get("readout"):
            table_rows.append(((r["name"], "readout of the state (not stated)"),
                               baselines["readout"]))
        if baselines.get("answer_likelihood"):
            table_rows.append(((r["name"], "answer likelihood (not stated)"),
                               baselines["answer_likelihood"]))
    if not table_rows:
        return None
    fits = {r["baselines"]["difficulty_table"].get("fit") for r in rows if r.get("baselines")}
    note = "".join(f"Difficulty table: {fit}.\n" for fit in sorted(f for f in fits if f))
    readouts = {(r["baselines"].get("readout") or {}).get("fit") for r in rows
                if r.get("baselines")}
    note += "".join(f"Readout: {fit}.\n" for fit in sorted(f for f in readouts if f))
    if any(label == READING_NAMES[EXPECTED] for (_, label), _ in table_rows):
        note += f"{EXPECTED_NOTE}\n"
    return (note + "Answer likelihood: exp(mean token log-prob) of the sampled answer; a "
            "ranking score only, never shown to the model.\n\n"
            + _table(["run", "confidence"], BASELINE_COLUMNS, table_rows)
            + _unavailable_notes(beside))


def interval_table(rows: Sequence[dict[str, Any]]) -> str | None:
    """Markdown table of each run's "bootstrap" (`calibrl.evaluation.bootstrap`): the standard
    error and percentile interval of every metric; None when no run has one."""
    with_intervals = [r for r in rows if r.get("bootstrap")]
    if not with_intervals:
        return None
    keys = INTERVAL_COLUMNS
    floor = any(CALIBRATED_ECE in r["bootstrap"] for r in with_intervals)
    titles = [title for _, title, _ in keys] + (["ECE if calibrated"] if floor else [])
    lines = ["| run | " + " | ".join(titles) + " |",
             "|---|" + "|".join([":---:"] * len(titles)) + "|"]
    for row in with_intervals:
        cells = []
        for key, _, _ in keys:
            interval = row["bootstrap"].get(key)
            cells.append(NOT_APPLICABLE if interval is None else
                         f"± {interval['se']:.3f} ({interval['low']:.3f}–{interval['high']:.3f})")
        if floor:
            drawn = row["bootstrap"].get(CALIBRATED_ECE)
            cells.append(NOT_APPLICABLE if drawn is None else
                         f"{drawn['mean']:.3f} ({drawn['low']:.3f}–{drawn['high']:.3f})")
        lines.append(f"| {_text(row['name'])} | " + " | ".join(cells) + " |")
    note = (" ECE if calibrated: the mean (interval) ECE of outcomes drawn from the "
            "confidences themselves, the floor these answers allow." if floor else "")
    return (f"Bootstrap over the evaluated problems: standard error ({LEVEL:.0%} interval).{note}"
            "\n\n" + "\n".join(lines) + "\n")


def tables_text(rows: Sequence[dict[str, Any]]) -> str:
    """Every table the rows have, in order: metrics, per group, baselines, bootstrap intervals."""
    return "\n".join(t for t in (metrics_table(rows), group_table(rows), baseline_table(rows),
                                 interval_table(rows)) if t is not None)


def _unique(label: str, taken: dict[str, Any]) -> str:
    while label in taken:  # two runs with one name must both stay visible
        label += "'"
    return label


def plot_compare(run_dirs: Sequence[str | Path], out_path: str | Path) -> Path | None:
    """Overlaid reliability diagram of the runs that have confidences; None when none has."""
    runs = {}
    for run_dir in _check_dirs(run_dirs):
        bins = load_bins(run_dir)
        if any(b.count for b in bins):
            runs[_unique(load_metrics(run_dir)["name"], runs)] = bins
    if not runs:
        return None
    return plot_reliability_overlay(runs, out_path, title="Reliability of compared runs")


def plot_risk_coverage_compare(run_dirs: Sequence[str | Path], out_path: str | Path
                               ) -> Path | None:
    """Overlaid risk-coverage curves of the runs that have confidences; None when none has."""
    curves = {}
    for run_dir in _check_dirs(run_dirs):
        curve = load_risk_coverage(run_dir)
        if curve is not None:
            curves[_unique(load_metrics(run_dir)["name"], curves)] = curve
    if not curves:
        return None
    return plot_risk_coverage(curves, out_path, title="Risk-coverage of compared runs")


def compare_runs(run_dirs: Sequence[str | Path], *, plot_path: str | Path | None = None,
                 risk_coverage_path: str | Path | None = None) -> str:
    """Markdown table of the runs' metrics, then the per-group table when any run has groups,
    the baselines table when any run has them and the bootstrap intervals when any run has them.

    Also writes the overlaid reliability plot if `plot_path` and the overlaid risk-coverage
    plot if `risk_coverage_path`; a figure no run can be drawn in is not written, and the text
    says so. Raises `UserError` naming the file when a run's
    `metrics.json` (or, for a plot, `bins.json` / `risk_coverage.json`) is missing or malformed.
    """
    for path, option in ((plot_path, "--plot"), (risk_coverage_path, "--risk-coverage-plot")):
        if path is not None:
            check_figure_path(path, option)
    dirs = _check_dirs(run_dirs)
    rows = [load_metrics(d) for d in dirs]
    skipped = []  # a figure asked for and not written is said, not left for the user to notice
    if plot_path is not None and plot_compare(dirs, plot_path) is None:
        skipped.append(f"--plot {plot_path}")
    if (risk_coverage_path is not None
            and plot_risk_coverage_compare(dirs, risk_coverage_path) is None):
        skipped.append(f"--risk-coverage-plot {risk_coverage_path}")
    return tables_text(rows) + "".join(
        f"\nnot written: {figure} (no run has calibration to draw)\n" for figure in skipped)
