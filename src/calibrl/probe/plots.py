"""Figures of a probe summary, as PNG files (matplotlib `Figure`, no pyplot: headless-safe)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from calibrl.utils.plotting import BAR_COLOR, CORRECT_COLOR, WRONG_COLOR, save_figure


def _draw(ax: Any, grid: list[float], curve: Mapping[str, Any], color: str, label: str) -> None:
    if curve["traces"] == 0:
        return
    ax.plot(grid, curve["mean"], "o-", color=color, markersize=4, label=label)
    ax.fill_between(grid, curve["lower"], curve["upper"], color=color, alpha=0.2,
                    label=f"{label}: 95% band")


def _mark_ends(ax: Any, summary: Mapping[str, Any]) -> None:
    """Label the confidence curve's first and last means: the two numbers a reader compares."""
    for key, offset, align in (("confidence_first", 6, "left"), ("confidence_last", -6, "right")):
        point = summary.get(key)  # absent in summaries written before these keys existed
        if not point or point["mean"] is None:
            continue
        ax.plot([point["x"]], [point["mean"]], "D", color=CORRECT_COLOR, markersize=6,
                markeredgecolor="black")
        ax.annotate(f"{point['mean']:.2f}", (point["x"], point["mean"]),
                    xytext=(offset, 6), textcoords="offset points", ha=align, fontsize=8)


def plot_curves(summary: Mapping[str, Any], out_path: str | Path, *,
                title: str = "Faithfulness probe") -> Path:
    """Mean confidence and mean "% same answer" against the share of the chain kept."""
    grid = list(summary["grid"])
    fig = Figure(figsize=(6.4, 4.8))
    ax = fig.subplots()
    _draw(ax, grid, summary["confidence"], CORRECT_COLOR, "confidence (correct share)")
    _mark_ends(ax, summary)
    _draw(ax, grid, summary["same_answer"], WRONG_COLOR, "same answer as the full chain")
    aoc = summary.get("same_answer_aoc")
    subtitle = f"{summary['traces']} traces" + (f", AOC = {aoc:.3f}" if aoc is not None else "")
    ax.set(xlim=(min(grid) - 0.02, max(grid) + 0.02), ylim=(-0.02, 1.02),
           xlabel="Share of the chain of thought kept", ylabel="Share of sampled answers",
           title=f"{title}\n{subtitle}")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return save_figure(fig, out_path)


def plot_decided(summary: Mapping[str, Any], out_path: str | Path, *,
                 title: str = "When is the answer decided?") -> Path:
    """How many traces have their final answer decided from each grid point on."""
    decided = summary["decided"]
    labels = list(decided["counts"])
    counts = [decided["counts"][label] for label in labels]
    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.subplots()
    bars = ax.bar(range(len(labels)), counts, color=BAR_COLOR, edgecolor="black", linewidth=0.6)
    ax.bar_label(bars, labels=[str(c) if c else "" for c in counts], fontsize=8)
    ax.set_xticks(range(len(labels)), labels)
    ax.set(xlabel="Share of the chain kept when the answer is decided",
           ylabel="Traces", title=f"{title}\n(same answer >= {decided['threshold']:g} "
           "from there on)")
    ax.grid(alpha=0.3, axis="y")
    return save_figure(fig, out_path)
