"""Recipe: RLVR vs single-turn RLCR vs two-turn RLCR from the same warmed-up tiny model.

Uses the data and SFT model of a finished `calibrl demo` run, trains one model per mode with the
demo's RL settings and the same sample budget (same steps, prompts per step and answers per
prompt; two-turn additionally samples its confidence turn), evaluates each on the held-out split
(two_turn and rlvr models with the two-turn confidence question, the rlcr model in its own
single-turn format), and prints the `calibrl compare` table.

    .venv/bin/python runs/compare_modes.py --demo outputs/demo --out outputs/modes --steps 40
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from calibrl.demo.pipeline import RL_OVERRIDES, DemoSettings
from calibrl.evaluation.compare import compare_runs
from calibrl.evaluation.run import EvalSettings, evaluate
from calibrl.training.config import load_config
from calibrl.training.trainer import Trainer

EVAL_MODE = {"rlvr": "two_turn", "rlcr": "rlcr", "two_turn": "two_turn"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", type=Path, default=Path("outputs/demo"))
    parser.add_argument("--out", type=Path, default=Path("outputs/modes"))
    parser.add_argument("--steps", type=int, default=DemoSettings().rl_steps)
    parser.add_argument("--modes", nargs="+", default=["rlvr", "rlcr", "two_turn"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    demo = DemoSettings()
    sft_model, data = args.demo / "sft/model", args.demo / "data"
    runs = []
    for mode in args.modes:
        start = time.perf_counter()
        cfg = load_config(None, [*RL_OVERRIDES, f"algorithm.mode={mode}", f"seed={args.seed}",
                                 f"model.path={sft_model}",
                                 f"data.train_path={data / 'train.parquet'}",
                                 f"optim.total_steps={args.steps}",
                                 f"logging.output_dir={args.out}", f"logging.run_name={mode}"])
        final = Trainer(cfg).train()
        settings = EvalSettings(mode=EVAL_MODE[mode], samples=demo.eval_samples,
                                temperature=demo.eval_temperature,
                                max_answer_tokens=demo.eval_max_answer_tokens,
                                max_confidence_tokens=demo.eval_max_confidence_tokens,
                                max_examples=demo.eval_examples, seed=args.seed)
        evaluate(final, data / "test.parquet", args.out / f"eval-{mode}", settings, name=mode)
        runs.append(args.out / f"eval-{mode}")
        print(f"{mode}: {time.perf_counter() - start:.0f} s")
    table = compare_runs(runs, plot_path=args.out / "reliability_modes.png")
    (args.out / "compare.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
