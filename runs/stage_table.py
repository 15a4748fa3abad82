"""Recipe: the demo's stage table, mean ± sd over finished demo runs (one per seed).

Each folder is the output of one `calibrl demo` (Countdown, facts or the real model) with the
confidence warm-up: it reads the evaluations each recipe writes (`eval-zero-shot/`,
`eval-held-out/` and the `-recalibrated` ones are the real model's) and prints, per stage, the
stated confidence's metrics and, on the same answers, the three references (difficulty table,
readout, answer likelihood) and the stated value's other reading (the expected or the sampled
value), then the within-group AUROC of each difficulty group and, where groups are `type/tier` (the
real model's world facts), lenient accuracy by fact type. The RL
baselines from the same answer warm-up are added where `runs/compare_modes.py` wrote them into
the folder's `baselines/` (two-turn RLCR without the confidence warm-up, RLVR, single-turn RLCR):

    for s in 1 2 3; do
      .venv/bin/calibrl demo seed=$s --out outputs/demo-s$s
      .venv/bin/python runs/compare_modes.py --demo outputs/demo-s$s \
          --out outputs/demo-s$s/baselines --modes two_turn rlvr rlcr --seeds $s --no-sft
    done
    .venv/bin/python runs/stage_table.py outputs/demo-s1 outputs/demo-s2 outputs/demo-s3
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

# (folder pattern inside a demo folder, label); a pattern matches one folder per demo run
STAGES = (("eval-zero-shot", "the model as it comes"),
          ("eval-before", "answer warm-up (SFT)"),
          ("eval-calibrated", "confidence warm-up"),
          ("eval-after", "then two-turn RLCR"),
          ("eval-after-recalibrated", "the same, recalibrated (Platt map on other questions)"),
          ("baselines/eval-two_turn-seed*", "two-turn RLCR without the confidence warm-up"),
          ("baselines/eval-rlvr-seed*", "RLVR from the answer warm-up"),
          ("baselines/eval-rlcr-seed*", "single-turn RLCR from the answer warm-up"),
          ("eval-held-out", "after RL, held-out fact type"),
          ("eval-held-out-recalibrated", "after RL, held-out fact type, recalibrated"))
REFERENCES = (("difficulty_table", "difficulty table (no model)"),
              ("readout", "readout of the state (not stated)"),
              ("answer_likelihood", "answer likelihood (not stated)"),
              ("stated_expected", "stated, expected value (the other reading)"),
              ("stated_sampled", "stated, sampled value (the other reading)"))
COLUMNS = (("accuracy", "accuracy ↑"), ("lenient", "lenient accuracy ↑"),
           ("parsed", "confidence parsed ↑"), ("ece", "ECE ↓"), ("brier", "Brier ↓"),
           ("auroc", "AUROC ↑"), ("within_group_auroc", "within-group AUROC ↑"))


def cell(values: list[float | None]) -> str:
    """mean ± sd of the values there are ('–' when none; the mean alone for one)."""
    present = [v for v in values if v is not None]
    if not present:
        return "–"
    mean = statistics.fmean(present)
    return f"{mean:.3f}" if len(present) == 1 else f"{mean:.3f} ± {statistics.stdev(present):.3f}"


STATED_ONLY = ("accuracy", "lenient", "parsed")


def stated(metrics: dict, key: str) -> float | None:
    """A column of the stated confidence's row: lenient accuracy where the task reports one,
    the share of confidences parsed where the mode states one."""
    if key == "lenient":
        return (metrics.get("extra_scores") or {}).get("lenient_accuracy")
    if key == "parsed":
        rate = metrics.get("unparsable_confidence_rate")
        return None if rate is None or metrics.get("ece") is None else 1.0 - rate
    return metrics.get(key)


def stage_metrics(runs: list[Path], pattern: str) -> list[dict]:
    """The metrics.json of the folder matching `pattern` in each run that has one."""
    found = [sorted(run.glob(f"{pattern}/metrics.json")) for run in runs]
    return [json.loads(files[0].read_text()) for files in found if files]


def rows(runs: list[Path]) -> list[tuple[str, dict[str, str]]]:
    """(label, {column: cell}) per stage and per reference of each stage."""
    out = []
    for folder, label in STAGES:
        metrics = stage_metrics(runs, folder)
        if not metrics:
            continue
        out.append((f"{label}: stated", {k: cell([stated(m, k) for m in metrics])
                                         for k, _ in COLUMNS}))
        for key, name in REFERENCES:
            refs = [(m.get("baselines") or {}).get(key) or {} for m in metrics]
            if any(refs):
                out.append((f"{label}: {name}", {k: cell([r.get(k) for r in refs])
                                                for k, _ in COLUMNS if k not in STATED_ONLY}))
    return out


def group_rows(runs: list[Path]) -> list[tuple[str, dict[str, str]]]:
    """Per stage, the stated confidence's AUROC inside each difficulty group, and its ECE."""
    out = []
    for folder, label in STAGES:
        metrics = stage_metrics(runs, folder)
        if not metrics:
            continue
        groups = sorted({g for m in metrics for g in m.get("by_group", {})})
        out.append((label, {f"{g}: {what}": cell([m["by_group"].get(g, {}).get(key)
                                                 for m in metrics])
                            for g in groups for key, what in (("accuracy", "acc"),
                                                              ("auroc", "AUROC"),
                                                              ("ece", "ECE"))}))
    return out


def fact_type_rows(runs: list[Path]) -> list[tuple[str, dict[str, str]]]:
    """Per stage, lenient accuracy by fact type (a group's name before its `/`): the real
    model's per-type knowledge, which a total can hide (one type's gain, another's loss)."""
    out = []
    for folder, label in STAGES:
        metrics = stage_metrics(runs, folder)
        per_run = [type_accuracy(m) for m in metrics]
        if not any(per_run):
            continue
        types = list(dict.fromkeys(t for acc in per_run for t in acc))
        out.append((label, {t: cell([acc.get(t) for acc in per_run]) for t in types}))
    return out


def type_accuracy(metrics: dict) -> dict[str, float]:
    """{fact type: lenient accuracy} from the groups' counts (empty when groups have no `/`)."""
    right: dict[str, float] = {}
    count: dict[str, int] = {}
    for group, m in metrics.get("by_group", {}).items():
        if "/" not in group:
            continue
        kind = group.split("/", 1)[0]
        lenient = (m.get("extra_scores") or {}).get("lenient_accuracy", m["accuracy"])
        right[kind] = right.get(kind, 0.0) + lenient * m["count"]
        count[kind] = count.get(kind, 0) + m["count"]
    return {kind: right[kind] / count[kind] for kind in count}


def markdown(table: list[tuple[str, dict[str, str]]], first: str) -> str:
    columns = list(dict.fromkeys(k for _, cells in table for k in cells))
    names = dict(COLUMNS)
    lines = [f"| {first} | " + " | ".join(names.get(c, c) for c in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    lines += [f"| {label} | " + " | ".join(cells.get(c, "–") for c in columns) + " |"
              for label, cells in table]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished demo output folders")
    args = parser.parse_args()
    print(f"{len(args.runs)} runs: {', '.join(str(r) for r in args.runs)}\n")
    print(markdown(rows(args.runs), "stage: confidence"))
    print()
    print(markdown(group_rows(args.runs), "stage"))
    by_type = fact_type_rows(args.runs)
    if by_type:
        print("\nlenient accuracy by fact type\n")
        print(markdown(by_type, "stage"))


if __name__ == "__main__":
    main()
