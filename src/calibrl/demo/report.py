"""The demo's `report.md`: metrics before/after, training curves, reliability, probe, timings."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from calibrl.evaluation.compare import (
    baseline_table,
    group_table,
    interval_table,
    metrics_table,
    plot_compare,
    plot_risk_coverage_compare,
)
from calibrl.probe.summary import ends_lines
from calibrl.protocol.modes import TWO_TURN
from calibrl.utils.atomic import atomic_write_text

CURVES = (
    ("answer/reward_mean", "answer reward (accuracy)"),
    ("confidence/reward_mean", "confidence reward (Brier)"),
    ("calibration/confidence_mean", "mean stated confidence"),
)


def plot_training_curves(metrics_jsonl: Path, out_path: Path) -> Path | None:
    """Reward and confidence curves over training steps from a run's `metrics.jsonl`."""
    if not metrics_jsonl.is_file():
        return None
    rows = [json.loads(line) for line in metrics_jsonl.read_text().splitlines() if line.strip()]
    if not rows:
        return None
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    steps = [r["step"] for r in rows]
    for key, label in CURVES:
        values = [r.get(key) for r in rows]
        if any(v is not None for v in values):
            ax.plot(steps, [float("nan") if v is None else v for v in values], label=label)
    ax.set_xlabel("training step")
    ax.set_ylim(0, 1.02)
    ax.set_title("Two-turn RLCR training")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    return out_path


def _timings_table(timings: Mapping[str, float]) -> str:
    lines = ["| stage | seconds |", "|---|---:|"]
    lines += [f"| {name} | {seconds:.0f} |" for name, seconds in timings.items()]
    lines.append(f"| **total** | **{sum(timings.values()):.0f}** |")
    return "\n".join(lines) + "\n"


def _probe_section(summary: Mapping[str, Any]) -> str:
    if not summary.get("traces"):
        return "No trace was probed.\n"
    grid = summary["grid"]
    lines = [f"{summary['traces']} greedy chains of thought of the SFT model, each cut at "
             f"{len(grid)} points; at each point answer-only completions were sampled and "
             "verified with the training verifier.\n",
             "| share of chain | " + " | ".join(f"{g:.1f}" for g in grid) + " |",
             "|---|" + "---:|" * len(grid),
             "| confidence (correct/samples) | "
             + " | ".join(f"{c:.2f}" for c in summary["confidence"]["mean"]) + " |"]
    if summary["same_answer"]["traces"]:
        lines.append("| same answer as the full chain | "
                     + " | ".join(f"{c:.2f}" for c in summary["same_answer"]["mean"]) + " |")
        lines.append(f"\nArea over the same-answer curve: {summary['same_answer_aoc']:.3f}; "
                     f"median point at which the answer is decided: "
                     f"{summary['decided']['median']}.\n")
    lines += [f"- {line}" for line in ends_lines(summary)]
    return "\n".join(lines) + "\n"


STAGE_NAMES = {"before": "before RL (SFT)", "calibrated": "after the confidence warm-up",
               "after": "after two-turn RLCR"}


def stage_rows(stages: Mapping[str, Mapping[str, Any] | None]) -> list[dict]:
    """A demo's evaluations by the name its tables show, in stage order (None: a stage the
    recipe leaves out), as rows of `metrics_table` / `group_table`."""
    return [{**metrics, "name": name, "mode": TWO_TURN.name}
            for name, metrics in stages.items() if metrics is not None]


def write_report(out_dir: Path, *, rows: Sequence[Mapping[str, Any]],
                 eval_dirs: Sequence[Path], timings: Mapping[str, float],
                 probe: Mapping[str, Any] | None, intro: str, heading: str) -> Path:
    """Write `out_dir/report.md` with its PNG figures; returns the report path. `rows`: the
    stages' evaluations as table rows (`stage_rows`), in the order of their folders
    `eval_dirs`; `intro` the opening line, `heading` the stage table's."""
    parts = ["# calibrl demo report\n", intro, f"## {heading}\n", metrics_table(rows)]
    by_group = group_table(rows)
    if by_group is not None:
        parts += ["\n### Per difficulty\n", by_group]
    baselines = baseline_table(rows)
    if baselines is not None:
        parts += ["\n### Does the confidence know the answer, or only the difficulty?\n",
                  "A confidence that only knows which problems are hard does no better than the "
                  "difficulty table; within-group AUROC ranks answers inside each difficulty "
                  "only (0.5 for the table). The answer's likelihood is what the model knows "
                  "without saying it.\n\n", baselines]
    intervals = interval_table(rows)
    if intervals is not None:
        parts += ["\n### How precise these numbers are\n", intervals]
    evals = list(eval_dirs)
    reliability = plot_compare(evals, out_dir / "reliability_before_after.png")
    if reliability is not None:
        parts += ["\n![reliability](reliability_before_after.png)\n"]
    coverage = plot_risk_coverage_compare(evals, out_dir / "risk_coverage_before_after.png")
    if coverage is not None:
        parts += ["\n### Selective prediction\n",
                  "Answer only when the stated confidence is at least t: the share answered "
                  "(coverage) against the error rate among them (risk); AURC is the area under "
                  "the curve (lower is better).\n",
                  "\n![risk-coverage](risk_coverage_before_after.png)\n"]
    curves = plot_training_curves(out_dir / "rl" / "metrics.jsonl", out_dir / "training_curves.png")
    if curves is not None:
        parts += ["\n## Training\n", "![training curves](training_curves.png)\n"]
    if probe is not None:
        parts += ["\n## Faithfulness probe\n", _probe_section(probe)]
        for png in sorted((out_dir / "probe").glob("*.png")):
            parts.append(f"\n![{png.stem}]({png.relative_to(out_dir)})\n")
    parts += ["\n## Time per stage\n", _timings_table(timings)]
    report = out_dir / "report.md"
    atomic_write_text(report, "\n".join(parts))
    return report
