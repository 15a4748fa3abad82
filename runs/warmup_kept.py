"""Recipe: does RL keep what the confidence warm-up built? Issue 42's points 1 and 2, per seed.

Each argument is `SEED:LABEL:WARMUP_EVAL:AFTER_RL_EVAL` (evaluation folders holding metrics.json):
the confidence warm-up's evaluation and the one after RL. For each reading of the stated value
(the sampled one and the expected value of the stated tenths; the metrics hold both, the
headline one and the other under `baselines`) it prints the within-group AUROC and Brier score
after the warm-up and after RL with their change (point 1: within ≥ −0.02, Brier ≤ +0.01), and
the stated value's within-group AUROC against the readout's after RL (point 2: ≥ −0.03):

    .venv/bin/python runs/warmup_kept.py \\
        1:demo:outputs/demo-s1/eval-calibrated:outputs/demo-s1/eval-after
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

READINGS = ("sampled", "expected")


def reading(metrics: dict, name: str) -> dict:
    """The metrics of one reading: the headline's when it is that reading, else the other's."""
    if metrics.get("confidence_reading", "sampled") == name:
        return metrics
    return metrics["baselines"][f"stated_{name}"]


def metrics(folder: str) -> dict:
    return json.loads((Path(folder) / "metrics.json").read_text())


def rows(seed: str, label: str, warm: dict, after: dict) -> list[str]:
    out = []
    readout = after["baselines"]["readout"]["within_group_auroc"]
    for name in READINGS:
        w, a = reading(warm, name), reading(after, name)
        within, brier = a["within_group_auroc"], a["brier"]
        out.append(
            f"| {seed} | {label} | {name} | {w['within_group_auroc']:.3f} | {within:.3f} | "
            f"{within - w['within_group_auroc']:+.3f} | {w['brier']:.3f} | {brier:.3f} | "
            f"{brier - w['brier']:+.3f} | {readout:.3f} | {within - readout:+.3f} | "
            f"{warm['accuracy']:.3f} → {after['accuracy']:.3f} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="SEED:LABEL:WARMUP_EVAL:AFTER_RL_EVAL")
    args = parser.parse_args()
    print("| seed | RL | reading | within, warm-up | within, after RL | change | Brier, warm-up "
          "| Brier, after RL | change | readout within, after RL | stated − readout | "
          "accuracy, warm-up → RL |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for run in args.runs:
        seed, label, warm, after = run.split(":")
        print("\n".join(rows(seed, label, metrics(warm), metrics(after))))


if __name__ == "__main__":
    main()
