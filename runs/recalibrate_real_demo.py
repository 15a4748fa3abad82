"""Recipe: add the real-model demo's recalibration to a demo folder that finished without it.

`calibrl demo --config configs/demo_real.yaml` fits and applies the Platt map itself (its
last stages, `data.recalibration_prompts`); a folder written before the recipe had them has
every other stage's output. This runs the same last stages on it, with the same functions and
settings (the seed's data stage again, which writes the same splits and adds the recalibration
questions; the final model's evaluation on them; the map), and prints what the map changed:

    .venv/bin/python runs/recalibrate_real_demo.py outputs/real_s1 --seed 1
    .venv/bin/python runs/stage_table.py outputs/real_s1 outputs/real_s2 outputs/real_s3

A data split that would come out different from the folder's is refused before anything is
evaluated (the folder's files are then as they were).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from rich.console import Console

from calibrl.demo.pipeline import load_demo_settings
from calibrl.demo.real import RECALIBRATED, RECALIBRATION, stage_recalibrate, stage_world_data
from calibrl.demo.stages import stage_eval

RECIPE = Path(__file__).resolve().parents[1] / "configs/demo_real.yaml"
SPLITS = ("train", "test", "held_out", "format", "rl")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("demo", type=Path, help="a finished real-model demo folder")
    parser.add_argument("--seed", type=int, required=True, help="the seed it ran with")
    parser.add_argument("--config", type=Path, default=RECIPE, help="the recipe it ran")
    args = parser.parse_args()
    out, console = args.demo, Console()
    settings = load_demo_settings(args.config, [f"seed={args.seed}", f"out_dir={out}"])
    with tempfile.TemporaryDirectory() as scratch:
        trial = load_demo_settings(args.config, [f"seed={args.seed}", f"out_dir={scratch}"])
        stage_world_data(trial, Console(quiet=True))
        changed = [n for n in SPLITS if digest(Path(scratch) / f"data/{n}.parquet")
                   != digest(out / f"data/{n}.parquet")]
        if changed:
            raise SystemExit(f"{out}: this seed's splits come out different ({', '.join(changed)})"
                             ": not the folder's demo")
        shutil.copy(Path(scratch) / f"data/{RECALIBRATION}.parquet", out / "data")
    stage_eval(settings, out / "rl/final-model", f"eval-{RECALIBRATION}", RECALIBRATION)
    fitted = stage_recalibrate(settings, console,
                               [name for name in RECALIBRATED if (out / name).is_dir()])
    for source, target in RECALIBRATED.items():
        if target in fitted:
            raw = json.loads((out / source / "metrics.json").read_text())
            console.print(f"{source}: ECE {raw['ece']:.3f} -> {fitted[target]['ece']:.3f}, "
                          f"Brier {raw['brier']:.3f} -> {fitted[target]['brier']:.3f}")


if __name__ == "__main__":
    main()
