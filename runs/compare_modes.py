"""Recipe: RLVR vs single-turn RLCR vs two-turn RLCR from the same warmed-up tiny model, several seeds.

Uses the data and SFT model of a finished `calibrl demo` run and trains one model per mode and
seed with the demo's RL settings and the same answer budget (same steps, prompts per step and
answers per prompt; two-turn additionally samples its confidence turn). Each model is evaluated on
the held-out split (two_turn and rlvr models with the demo's confidence question as a second turn,
the rlcr model in its own single-turn format); the table gives mean ± sd over seeds. The warmed-up
model itself is evaluated with the same seeds ("sft": what RL starts from), and two baselines are
read from the two-turn runs' evaluations: the cross-fitted difficulty table and the answers' own
likelihood (`calibrl.evaluation.baselines`).

    .venv/bin/python runs/compare_modes.py --demo outputs/demo --out outputs/modes --seeds 0 1 2

`--set key=value ...` changes the RL settings of every run (a route to try, e.g.
`--set rollout.num_generations_confidence=8`); `--no-sft` skips the warmed-up model's row;
`--start calibrate/model` starts RL after the confidence warm-up, as the demo's own RL does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import yaml

from calibrl.demo.pipeline import load_demo_settings
from calibrl.evaluation.run import evaluate
from calibrl.settings import DemoSettings, updated
from calibrl.training.trainer import Trainer

EVAL_MODE = {"rlvr": "two_turn", "rlcr": "rlcr", "two_turn": "two_turn"}
METRICS = (("accuracy", "accuracy ↑"), ("ece", "ECE ↓"), ("brier", "Brier ↓"),
           ("auroc", "AUROC ↑"), ("within_group_auroc", "within-group AUROC ↑"),
           ("auroc 2 numbers", "AUROC in 2-number ↑"), ("auroc 3 numbers", "AUROC in 3-number ↑"),
           ("aurc", "AURC ↓"))


def flat(metrics: dict) -> dict:
    """A run's metrics with each group's AUROC as "auroc <group>"."""
    groups = metrics.get("by_group") or {}
    # a run's groups hold its metrics; a baseline's hold the AUROC alone
    return {**metrics, **{f"auroc {label}": m.get("auroc") if isinstance(m, dict) else m
                          for label, m in groups.items()}}


def baseline_rows(two_turn: list[dict]) -> dict[str, list[dict]]:
    """The difficulty table and the answer likelihood on each two-turn run's own answers."""
    table, likelihood = [], []
    for metrics in two_turn:
        baselines = metrics.get("baselines") or {}
        if baselines.get("difficulty_table"):
            table.append(baselines["difficulty_table"])
        if baselines.get("answer_likelihood"):
            lk = baselines["answer_likelihood"]
            likelihood.append(lk)
    return {"difficulty table (two_turn's answers)": table,
            "answer likelihood (two_turn's answers, not stated)": likelihood}


def evaluate_sft(demo: DemoSettings, args: argparse.Namespace, seed: int) -> dict:
    settings = updated(demo.eval, {"seed": seed})
    return evaluate(args.demo / "sft/model", args.demo / "data/test.parquet",
                    args.out / f"eval-sft-seed{seed}", settings, name=f"sft-seed{seed}")


def train_and_evaluate(demo: DemoSettings, args: argparse.Namespace, mode: str,
                       seed: int) -> dict:
    data, run = args.demo / "data", f"{mode}-seed{seed}"
    cfg = updated(demo.rl, {**args.set, "algorithm.mode": mode, "seed": seed,
                            "model.path": str(args.demo / args.start),
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
        cells = [_cell([flat(r).get(key) for r in runs]) for key, _ in METRICS]
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
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="RL settings for every run, as on the calibrl train command line.")
    parser.add_argument("--no-sft", action="store_true", help="Do not evaluate the SFT model.")
    parser.add_argument("--start", default="sft/model",
                        help="The model RL starts from, inside --demo (calibrate/model: after "
                             "the confidence warm-up, as the demo's own RL).")
    args = parser.parse_args()
    args.set = {key: yaml.safe_load(value) for key, value in
                (item.split("=", 1) for item in args.set)}
    demo = load_demo_settings(args.recipe)
    args.steps = args.steps or demo.rl.optim.total_steps
    results: dict[str, list[dict]] = {"sft": [], **{mode: [] for mode in args.modes}}
    for seed in args.seeds:
        if not args.no_sft:
            results["sft"].append(evaluate_sft(demo, args, seed))
        for mode in args.modes:
            start = time.perf_counter()
            results[mode].append(train_and_evaluate(demo, args, mode, seed))
            print(f"{mode} seed {seed}: {time.perf_counter() - start:.0f} s", flush=True)
    rows = {**results, **baseline_rows(results.get("two_turn", []))}
    text = table({name: runs for name, runs in rows.items() if runs})
    (args.out / "compare.md").write_text(text)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
