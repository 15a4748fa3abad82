"""Are the recalibration questions as new to the model as the test's? Lenient accuracy by fact
type of the final model's answers, the recalibration questions split by whether one of their
entities is also named by a format or RL question, beside the test's (whose entities no stage
asks). Reads the evaluations `benchmarks/rl/whole_test_split.py` and
`benchmarks/rl/more_recalibration.py` wrote (the recipe's own ones where those are absent),
pooled over the folders given:

    .venv/bin/python benchmarks/rl/entity_overlap.py outputs/strat_s1 outputs/strat_s2 outputs/strat_s3
"""

from __future__ import annotations

import argparse
from pathlib import Path

from calibrl.evaluation.run import read_predictions
from calibrl.tasks.files import load_examples

# (data split, evaluations to read in order of preference, side of the table)
SOURCES = (("recalibration", ("eval-recalibration",), "recalibration"),
           ("recalibration_more", ("eval-recalibration_more",), "recalibration"),
           ("test", ("eval-after-whole-test", "eval-after"), "test"))


def tally(run: Path, counts: dict[tuple[str, str], list[float]]) -> None:
    """Add one demo folder's answers to counts[(fact type, column)] = [right, answers]."""
    trained = {e for split in ("format", "rl")
               for ex in load_examples(run / f"data/{split}.parquet") for e in ex.extra["entities"]}
    for split, evals, side in SOURCES:
        found = [run / name for name in evals if (run / name / "predictions.jsonl").is_file()]
        if not (run / f"data/{split}.parquet").is_file() or not found:
            continue
        about = {ex.ground_truth["question"]: (ex.extra["fact_type"],
                                               bool(set(ex.extra["entities"]) & trained))
                 for ex in load_examples(run / f"data/{split}.parquet")}
        for record in read_predictions(found[0]):
            kind, shared = about[record["ground_truth"]["question"]]
            column = side if side == "test" else f"{side}, {'an entity trained on' if shared else 'new entities'}"
            right = (record.get("extra_scores") or {}).get("lenient_accuracy", record["correct"])
            cell = counts.setdefault((kind, column), [0.0, 0])
            cell[0] += float(right)
            cell[1] += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished real demo folders")
    args = parser.parse_args()
    counts: dict[tuple[str, str], list[float]] = {}
    for run in args.runs:
        tally(run, counts)
    columns = sorted({c for _, c in counts})
    print("| fact type | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for kind in sorted({k for k, _ in counts}):
        cells = [counts.get((kind, c)) for c in columns]
        print(f"| {kind} | " + " | ".join("–" if not v else f"{v[0] / v[1]:.3f} of {v[1]}"
                                           for v in cells) + " |")


if __name__ == "__main__":
    main()
