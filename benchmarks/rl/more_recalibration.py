"""Does a larger recalibration set bring the real recipe's mapped ECE to its floor?

The recipe fits its Platt map on 120 training questions no stage asked (240 answers); 318 more
are left unused on every seed. This asks the final model the rest of them too (the demo's eval
settings, no `eval.max_examples` cap), fits the map on all of those answers together with the
demo's own 240, and applies it to the whole test split's answers that
`benchmarks/rl/whole_test_split.py` wrote (run that first):

    .venv/bin/python benchmarks/rl/whole_test_split.py outputs/demo_real --seed 0
    .venv/bin/python benchmarks/rl/more_recalibration.py outputs/demo_real --seed 0
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from rich.console import Console

from calibrl.demo.pipeline import load_demo_settings
from calibrl.demo.real import RECALIBRATION, stage_world_data
from calibrl.demo.stages import stage_eval
from calibrl.evaluation.bootstrap import CALIBRATED_ECE
from calibrl.evaluation.recalibration import fit_platt, reading_values, recalibrated_records
from calibrl.evaluation.run import read_predictions, write_run
from calibrl.tasks.files import load_examples, write_examples

RECIPE = Path(__file__).resolve().parents[2] / "configs/demo_real.yaml"
MORE = f"{RECALIBRATION}_more"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("demo", type=Path, help="a finished real-model demo folder")
    parser.add_argument("--seed", type=int, required=True, help="the seed it ran with")
    parser.add_argument("--config", type=Path, default=RECIPE, help="the recipe it ran")
    args = parser.parse_args()
    out = args.demo
    uncapped = [f"seed={args.seed}", "eval.max_examples=null"]
    settings = load_demo_settings(args.config, [*uncapped, f"out_dir={out}"])
    with tempfile.TemporaryDirectory() as scratch:
        every = load_demo_settings(args.config, [*uncapped, f"out_dir={scratch}",
                                                 "data.recalibration_prompts=100000"])
        stage_world_data(every, Console(quiet=True))
        rest = load_examples(Path(scratch) / f"data/{RECALIBRATION}.parquet")
    asked = load_examples(out / f"data/{RECALIBRATION}.parquet")
    if rest[:len(asked)] != asked:
        raise SystemExit(f"{out}: this seed's recalibration questions come out different")
    write_examples(out / f"data/{MORE}.parquet", rest[len(asked):])
    stage_eval(settings, out / "rl/final-model", f"eval-{MORE}", MORE)

    reading = settings.eval.confidence_reading
    answers = (read_predictions(out / f"eval-{RECALIBRATION}")
               + read_predictions(out / f"eval-{MORE}"))
    platt = fit_platt(*reading_values(answers, reading))
    described = json.dumps({**platt.to_dict(), "reading": reading,
                            "fitted_on": f"eval-{RECALIBRATION} + eval-{MORE}"}, indent=2)
    target = "eval-after-whole-test-recalibrated-more"
    rows = recalibrated_records(read_predictions(out / "eval-after-whole-test"), platt, reading)
    metrics = write_run(out / target, rows, settings.eval, target,
                        extra_files={"recalibration.json": described + "\n"})
    floor = metrics["bootstrap"][CALIBRATED_ECE]  # write_run drew it with the metrics
    print(f"{out}: map on {platt.answers} answers ({platt.rate:.0%} right), slope "
          f"{platt.slope:.2f}, intercept {platt.intercept:.2f}; whole test split "
          f"({metrics['count']} answers): ECE {metrics['ece']:.3f} (if calibrated "
          f"{floor['mean']:.3f}), Brier {metrics['brier']:.3f}")


if __name__ == "__main__":
    main()
