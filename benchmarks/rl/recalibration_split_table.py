"""The real recipe's recalibration questions drawn from training questions no stage asks against
a third split by entity (`data.recalibration_split=entities`), seed by seed, judged on each
seed's whole test split (`benchmarks/rl/whole_test_split.py` run on every folder first):

    .venv/bin/python benchmarks/rl/recalibration_split_table.py \\
        1=outputs/strat_s1,outputs/ent_s1 2=outputs/strat_s2,outputs/ent_s2 ...

Each argument is SEED=TRAINING_FOLDER,ENTITIES_FOLDER; prints one markdown row per folder and
the mean ± sd of each column over the seeds given.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from calibrl.evaluation.bootstrap import CALIBRATED_ECE

COLUMNS = ("recalibration answers right", "test answers right", "ECE recalibrated",
           "if calibrated", "Brier recalibrated", "Brier table", "AUROC", "within-group")


def _metrics(folder: Path, name: str) -> dict:
    return json.loads((folder / name / "metrics.json").read_text())


def row(folder: Path) -> list[float]:
    """The columns of one finished demo folder."""
    recal = _metrics(folder, "eval-recalibration")
    whole = _metrics(folder, "eval-after-whole-test")
    mapped = _metrics(folder, "eval-after-whole-test-recalibrated")
    return [recal["accuracy"], whole["accuracy"],  # strict: what the map and ECE are fitted to
            mapped["ece"], mapped["bootstrap"][CALIBRATED_ECE]["mean"], mapped["brier"],
            mapped["baselines"]["difficulty_table"]["brier"], mapped["auroc"],
            mapped["within_group_auroc"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", nargs="+", help="SEED=TRAINING_FOLDER,ENTITIES_FOLDER")
    args = parser.parse_args()
    rows: dict[str, list[list[float]]] = {"training": [], "entities": []}
    print("| seed | recalibration from | " + " | ".join(COLUMNS) + " |")
    print("|---|---|" + "---:|" * len(COLUMNS))
    for pair in args.pairs:
        seed, folders = pair.split("=", 1)
        for split, folder in zip(rows, folders.split(","), strict=True):
            values = row(Path(folder))
            rows[split].append(values)
            print(f"| {seed} | {split} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    for split, values in rows.items():
        if len(values) > 1:
            cells = [f"{statistics.mean(c):.3f} ± {statistics.stdev(c):.3f}"
                     for c in zip(*values, strict=True)]
            print(f"| mean ± sd | {split} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
