"""A Platt map fitted on answers about entities no stage trained on: the test split, cross-fitted.

The recipe fits its map on training questions no stage asked, but their entities are the
format and RL questions' entities (the split is by entity; its training rows are asked in
order), and on every seed those answers are 3-5 points more often right than the test's.
This asks how well the level is read when the map's answers are as new to the model as the
test's: the whole test split's answers (`benchmarks/rl/whole_test_split.py`) are cut into two
folds by linked entity sets (questions that share an entity stay together), each fold mapped
by the map fitted on the other, and ECE and Brier taken on all of them; repeated over
`--repeats` random cuts (mean ± sd over the cuts):

    .venv/bin/python benchmarks/rl/whole_test_split.py outputs/demo_real --seed 0
    .venv/bin/python benchmarks/rl/cross_fitted_recalibration.py outputs/demo_real
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from calibrl.evaluation.bootstrap import calibrated_ece
from calibrl.evaluation.metrics import brier_score, expected_calibration_error
from calibrl.evaluation.recalibration import READING_KEYS, fit_platt, reading_values
from calibrl.evaluation.records import valid_confidence
from calibrl.evaluation.run import read_predictions
from calibrl.tasks.files import load_examples
from calibrl.tasks.short_answer.world_split import components


def linked_sets(questions: dict[str, list[str]]) -> dict[str, int]:
    """{question: the index of its set}: questions sharing an entity, transitively, share one
    (the split's own `components`, read on the questions' entity lists)."""
    names = list(questions)
    facts = [SimpleNamespace(entities=questions[q]) for q in names]
    return {names[i]: k for k, members in enumerate(components(facts)) for i in members}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("demo", type=Path, help="a real demo folder with eval-after-whole-test")
    parser.add_argument("--repeats", type=int, default=20, help="random cuts into two folds")
    args = parser.parse_args()
    out = args.demo
    reading = json.loads((out / "eval-after-whole-test/metrics.json").read_text())[
        "confidence_reading"]
    examples = load_examples(out / "data/test.parquet")
    sets = linked_sets({ex.ground_truth["question"]: list(ex.extra["entities"])
                        for ex in examples})
    records = read_predictions(out / "eval-after-whole-test")
    kept = [r for r in records if valid_confidence(r.get(READING_KEYS[reading])) is not None]
    conf, correct = reading_values(kept, reading)
    of = np.array([sets[r["ground_truth"]["question"]] for r in kept])  # (N,) set of each
    eces, briers, floors = [], [], []
    for repeat in range(args.repeats):
        fold = np.random.default_rng(repeat).integers(0, 2, size=max(sets.values()) + 1)[of]
        mapped = np.empty_like(conf)
        for k in (0, 1):
            platt = fit_platt(conf[fold != k], correct[fold != k])
            mapped[fold == k] = platt(conf[fold == k])
        eces.append(expected_calibration_error(mapped, correct))
        briers.append(brier_score(mapped, correct))
        floors.append(calibrated_ece(mapped, draws=200)["mean"])
    print(f"{out}: {conf.size} answers, {max(sets.values()) + 1} linked sets; cross-fitted "
          f"map: ECE {statistics.fmean(eces):.3f} ± {statistics.stdev(eces):.3f} (if "
          f"calibrated {statistics.fmean(floors):.3f}), Brier {statistics.fmean(briers):.3f}")


if __name__ == "__main__":
    main()
