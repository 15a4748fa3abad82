"""Recipe: the ECE a calibrated reading would show on an evaluation's own answers.

Binned ECE on a few hundred answers is above zero even for a reading calibrated by
construction; `calibrl.evaluation.bootstrap.calibrated_ece` draws each answer's outcome from
its confidence and measures that floor (evaluations write it into metrics.json as
`bootstrap.ece_if_calibrated`; this reads it from the predictions of folders written before):

    .venv/bin/python runs/ece_floor.py outputs/demo_real/eval-after outputs/demo_real/eval-after-recalibrated
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from calibrl.evaluation.bootstrap import calibrated_ece
from calibrl.evaluation.metrics import expected_calibration_error
from calibrl.evaluation.recalibration import reading_values
from calibrl.evaluation.run import read_predictions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("evals", nargs="+", type=Path, help="evaluation folders")
    parser.add_argument("--draws", type=int, default=1000, help="outcome draws")
    args = parser.parse_args()
    print("| evaluation | answers with a value | ECE measured | ECE if calibrated (95 % interval) |")
    print("|---|---:|---:|---|")
    for folder in args.evals:
        reading = json.loads((folder / "metrics.json").read_text()).get("confidence_reading",
                                                                         "sampled")
        conf, correct = reading_values(read_predictions(folder), reading)
        floor = calibrated_ece(conf, draws=args.draws)
        print(f"| {folder} | {conf.size} | {expected_calibration_error(conf, correct):.3f} | "
              f"{floor['mean']:.3f} ({floor['low']:.3f}–{floor['high']:.3f}) |")


if __name__ == "__main__":
    main()
