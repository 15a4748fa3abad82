"""Figures of an evaluation, written as PNG files.

Built on `matplotlib.figure.Figure` without pyplot: no display, no global backend switch, no
figure registry to leak, so these work on headless machines and inside other programs.
Each function returns the path it wrote; parent folders are created.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from calibrl.evaluation.metrics import (
    DEFAULT_N_BINS,
    ReliabilityBin,
    aurc_from_curve,
    bin_edges,
    bin_index,
    check_arrays,
    ece_from_bins,
)
from calibrl.utils.plotting import BAR_COLOR, CORRECT_COLOR, WRONG_COLOR, save_figure


def _two_panels(title: str) -> tuple[Figure, Any, Any]:
    """A tall calibration panel above a short count panel sharing the confidence axis."""
    fig = Figure(figsize=(6.4, 7.2))
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    top.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
    top.set(xlim=(0, 1), ylim=(0, 1), ylabel="Accuracy", title=title)
    top.grid(alpha=0.3)
    bottom.set(xlabel="Confidence", ylabel="Examples")
    bottom.grid(alpha=0.3, axis="y")
    return fig, top, bottom


def _nonempty(bins: Sequence[ReliabilityBin]) -> list[ReliabilityBin]:
    filled = [b for b in bins if b.count > 0]
    if not filled:
        raise ValueError("no examples to plot")
    return filled


def plot_reliability(
    bins: Sequence[ReliabilityBin], out_path: str | Path, *, title: str = "Reliability diagram"
) -> Path:
    """Accuracy per confidence bin against the diagonal, with bin counts in a lower panel.

    Bars span each bin and reach its accuracy; dots mark the bin's mean confidence, so the
    horizontal distance from a dot to the diagonal is that bin's calibration gap.
    """
    filled = _nonempty(bins)
    fig, top, bottom = _two_panels(f"{title}\nECE = {ece_from_bins(filled):.4f}")
    lowers = np.array([b.lower for b in bins])
    widths = np.array([b.upper - b.lower for b in bins])
    counts = np.array([b.count for b in bins])
    acc = np.array([b.accuracy if b.count else 0.0 for b in bins])
    top.bar(lowers, acc, width=widths, align="edge", color=BAR_COLOR, alpha=0.75,
            edgecolor="black", linewidth=0.6, label="accuracy in bin")
    top.plot([b.mean_confidence for b in filled], [b.accuracy for b in filled], "o",
             color="black", markersize=4, label="bin mean confidence")
    top.legend(loc="upper left")
    bars = bottom.bar(lowers, counts, width=widths, align="edge", color="grey",
                      edgecolor="black", linewidth=0.6)
    bottom.bar_label(bars, labels=[str(c) if c else "" for c in counts], fontsize=8)
    bottom.set_ylim(0, max(counts.max() * 1.25, 1))
    return save_figure(fig, out_path)


def plot_reliability_overlay(
    runs: Mapping[str, Sequence[ReliabilityBin]],
    out_path: str | Path,
    *,
    title: str = "Reliability diagram",
) -> Path:
    """Several runs' reliability curves on one diagonal, labelled by run name.

    Each curve joins (mean confidence, accuracy) of a run's non-empty bins; the lower panel shows
    the share of each run's examples per bin (shares, not counts, so runs of different sizes
    compare).
    """
    if not runs:
        raise ValueError("no runs to plot")
    fig, top, bottom = _two_panels(title)
    bottom.set_ylabel("Share of examples")
    width = 1.0 / (len(runs) + 1)
    for k, (name, bins) in enumerate(runs.items()):
        filled = _nonempty(bins)
        label = f"{name} (ECE {ece_from_bins(filled):.3f})"
        line = top.plot([b.mean_confidence for b in filled], [b.accuracy for b in filled],
                        "o-", markersize=4, label=label)[0]
        total = sum(b.count for b in bins)
        bin_w = np.array([b.upper - b.lower for b in bins])
        left = np.array([b.lower for b in bins]) + (k + 0.5) * width * bin_w
        bottom.bar(left, [b.count / total for b in bins], width=width * bin_w, align="edge",
                   color=line.get_color())
    top.legend(loc="upper left", fontsize=8)
    bottom.set_ylim(0, 1)
    return save_figure(fig, out_path)


def plot_confidence_histogram(
    confidences: Any,
    correct: Any,
    out_path: str | Path,
    *,
    n_bins: int = DEFAULT_N_BINS,
    title: str = "Confidence by correctness",
) -> Path:
    """Counts of confidences per bin (the ECE bins), side by side for correct and wrong answers.

    Shapes: confidences (N,) in [0, 1], correct (N,) bool.
    """
    conf, corr = check_arrays(confidences, correct)
    edges = bin_edges(n_bins)
    idx = bin_index(conf, n_bins)
    right = np.bincount(idx[corr == 1.0], minlength=n_bins)  # (n_bins,)
    wrong = np.bincount(idx[corr == 0.0], minlength=n_bins)  # (n_bins,)
    half = (edges[1:] - edges[:-1]) * 0.45
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.subplots()
    ax.bar(edges[:-1] + 0.05 * half, right, width=half, align="edge", color=CORRECT_COLOR,
           label=f"correct ({int(right.sum())})")
    ax.bar(edges[:-1] + 1.05 * half, wrong, width=half, align="edge", color=WRONG_COLOR,
           label=f"wrong ({int(wrong.sum())})")
    ax.set(xlim=(0, 1), xlabel="Confidence", ylabel="Examples", title=title)
    ax.set_xticks(edges if n_bins <= 20 else np.linspace(0, 1, 11))
    ax.grid(alpha=0.3, axis="y")
    ax.legend(loc="upper left")
    return save_figure(fig, out_path)


def plot_not_available(out_path: str | Path, *, title: str, reason: str) -> Path:
    """A figure that says why there is nothing to draw, where a diagram would otherwise stand:
    an empty or perfect-looking diagram would read as a result."""
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.subplots()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, f"calibration not available:\n{reason}", ha="center", va="center", wrap=True,
            transform=ax.transAxes)
    return save_figure(fig, out_path)


def plot_risk_coverage(
    curves: Mapping[str, tuple[Any, Any]],
    out_path: str | Path,
    *,
    title: str = "Risk-coverage",
) -> Path:
    """Selective risk against coverage, one step curve per label, AURC in the legend.

    `curves` maps a label to (coverage, risk) as `metrics.risk_coverage` returns them, each
    shape (K,). Steps are drawn so the area under each curve is exactly its AURC; a dotted line
    marks the run's risk at full coverage (1 - accuracy) for reference.
    """
    if not curves:
        raise ValueError("no runs to plot")
    fig = Figure(figsize=(6.4, 4.8))
    ax = fig.subplots()
    for label, (coverage, risk) in curves.items():
        coverage = np.asarray(coverage, dtype=np.float64)
        risk = np.asarray(risk, dtype=np.float64)
        area = aurc_from_curve(coverage, risk)
        line = ax.step(np.concatenate([[0.0], coverage]), np.concatenate([risk[:1], risk]),
                       where="pre", label=f"{label} (AURC {area:.3f})")[0]
        ax.plot(coverage, risk, "o", markersize=3, color=line.get_color())
        ax.axhline(risk[-1], linestyle=":", linewidth=0.8, color=line.get_color())
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="Coverage (share answered)",
           ylabel="Risk (error rate among answered)", title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return save_figure(fig, out_path)
