"""The real recipe's final model on its whole test split, through the demo's own Platt map.

The recipe evaluates 120 test questions (`eval.max_examples`); on their 240 answers even a
reading calibrated by construction shows ECE about 0.05 (`runs/ece_floor.py`), the issue's
target. This evaluates the same final model on every test question of its seed (no cap; the
demo's eval settings otherwise), writes `eval-after-whole-test/`, and maps it with the map the
demo fitted (`eval-after-recalibrated/recalibration.json`) into
`eval-after-whole-test-recalibrated/`, so the target can be judged on twice the answers:

    .venv/bin/python benchmarks/rl/whole_test_split.py outputs/demo_real --seed 0
    .venv/bin/python runs/ece_floor.py outputs/demo_real/eval-after-whole-test*
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from calibrl.demo.pipeline import load_demo_settings
from calibrl.demo.stages import stage_eval
from calibrl.evaluation.recalibration import PlattMap, recalibrated_records
from calibrl.evaluation.run import read_predictions, write_run

RECIPE = Path(__file__).resolve().parents[2] / "configs/demo_real.yaml"
WHOLE = "eval-after-whole-test"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("demo", type=Path, help="a finished real-model demo folder")
    parser.add_argument("--seed", type=int, required=True, help="the seed it ran with")
    parser.add_argument("--config", type=Path, default=RECIPE, help="the recipe it ran")
    args = parser.parse_args()
    out = args.demo
    settings = load_demo_settings(args.config, [f"seed={args.seed}", f"out_dir={out}",
                                                "eval.max_examples=null"])
    saved = json.loads((out / "eval-after-recalibrated/recalibration.json").read_text())
    platt = PlattMap(**{k: saved[k] for k in ("slope", "intercept", "answers", "rate")})
    stage_eval(settings, out / "rl/final-model", WHOLE)
    rows = recalibrated_records(read_predictions(out / WHOLE), platt, saved["reading"])
    target = f"{WHOLE}-recalibrated"
    metrics = write_run(out / target, rows, settings.eval, target,
                        extra_files={"recalibration.json": json.dumps(saved, indent=2) + "\n"})
    print(f"{out}: {metrics['count']} answers, recalibrated ECE {metrics['ece']:.3f}, "
          f"Brier {metrics['brier']:.3f}, AUROC {metrics['auroc']:.3f}")


if __name__ == "__main__":
    main()
