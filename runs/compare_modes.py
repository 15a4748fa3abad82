"""Recipe: RLVR vs single-turn RLCR vs two-turn RLCR from the same warmed-up tiny model, several seeds.

Uses the data and SFT model of a finished `calibrl demo` run and trains one model per mode and
seed with the demo's RL settings and the same answer budget (same steps, prompts per step and
answers per prompt; two-turn additionally samples its confidence turn). Each model is evaluated on
the held-out split (two_turn and rlvr models with the demo's confidence question as a second turn,
the rlcr model in its own single-turn format); the table gives mean ± sd over seeds.

    .venv/bin/python runs/compare_modes.py --demo outputs/demo --out outputs/modes --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from calibrl.demo.pipeline import load_demo_settings
from calibrl.evaluation.run import evaluate
from calibrl.settings import DemoSettings, updated
from calibrl.training.trainer import Trainer

EVAL_MODE = {"rlvr": "two_turn", "rlcr": "rlcr", "two_turn": "two_turn"}
METRICS = (("accuracy", "accuracy ↑"), ("ece", "ECE ↓"), ("brier", "Brier ↓"),
           ("auroc", "AUROC ↑"), ("aurc", "AURC ↓"))


def train_and_evaluate(demo: DemoSettings, args: argparse.Namespace, mode: str,
                       seed: int) -> dict:
    data, run = args.demo / "data", f"{mode}-seed{seed}"
    cfg = updated(demo.rl, {"algorithm.mode": mode, "seed": seed,
                            "model.path": str(args.demo / "sft/model"),
                            "data.train_path": str(data / "rl.parquet"),
                            "optim.total_steps": args.steps,
                            "logging.output_dir": str(args.out), "logging.run_name": run})
    final = Trainer(cfg).train()
    settings = updated(demo.eval, {"mode": EVAL_MODE[mode], "seed": seed})
    return evaluate(final, data / "test.parquet", args.out / f"eval-{run}", settings, name=run)


def _cell(values: list[float | None]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f}"


def table(results: dict[str, list[dict]]) -> str:
    """Markdown: one row per mode, mean ± sd (sample sd) over seeds of each metric."""
    lines = ["| mode | seeds | " + " | ".join(label for _, label in METRICS) + " |",
             "|---|---:|" + "---:|" * len(METRICS)]
    for mode, runs in results.items():
        cells = [_cell([r.get(key) for r in runs]) for key, _ in METRICS]
        lines.append(f"| {mode} | {len(runs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", type=Path, default=Path("outputs/demo"))
    parser.add_argument("--out", type=Path, default=Path("outputs/modes"))
    parser.add_argument("--recipe", type=Path, default=None,
                        help="The demo's recipe (default: configs/demo.yaml).")
    parser.add_argument("--steps", type=int, default=None,
                        help="RL steps (default: the recipe's rl.optim.total_steps).")
    parser.add_argument("--modes", nargs="+", default=["rlvr", "rlcr", "two_turn"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = parser.parse_args()
    demo = load_demo_settings(args.recipe)
    args.steps = args.steps or demo.rl.optim.total_steps
    results: dict[str, list[dict]] = {mode: [] for mode in args.modes}
    for seed in args.seeds:
        for mode in args.modes:
            start = time.perf_counter()
            results[mode].append(train_and_evaluate(demo, args, mode, seed))
            print(f"{mode} seed {seed}: {time.perf_counter() - start:.0f} s", flush=True)
    text = table(results)
    (args.out / "compare.md").write_text(text)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
