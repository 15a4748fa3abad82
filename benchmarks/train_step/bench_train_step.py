"""Time per RL training step: calibrl (`rlvr` mode) vs TRL's `GRPOTrainer`, side by side.

Both train the same tiny model on the same Countdown prompts with the same group size, completion
length, temperature, learning rate, precision, micro-batch and thread count, one optimisation pass
per generation and no reference model. Each side runs in its own process, one after the other (so
they never share the CPU), for a warm-up step and then the measured steps, in alternating rounds;
the medians, the split into generation vs optimisation, and each process's peak resident memory
are compared. Wall and process CPU time are both reported: on a shared machine other jobs inflate
wall time, while CPU time with one thread (the default) counts only the work done.

TRL is a benchmark-only dependency; keep it out of the main venv:

    python3 -m venv .venv-bench
    .venv-bench/bin/pip install torch==2.13.0 && .venv-bench/bin/pip install -e ".[bench]"
    .venv-bench/bin/python benchmarks/train_step/bench_train_step.py [--steps 5] [--precision bf16]

The model and prompts are the demo's (`outputs/demo/sft/model`, `outputs/demo/data/rl.parquet`,
made by `make demo`: a warmed-up model that writes short, well-formed answers to prompts in its
own format) when they exist, else a freshly built random tiny model (which samples until the
length limit on both sides) on generated prompts. calibrl encodes each distinct prompt once per
micro-batch (`optim.shared_context`; `--no-shared-context` for the plain forward pass) and leaves
out of the forward/backward the rows of groups that all scored the same, whose gradient is 0
(`optim.skip_rows_without_gradient`; `--no-skip-rows` to train every row as TRL does). Writes
benchmarks/results/train_step.json and prints a table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from common import SideResult, Spec  # noqa: E402

DEMO = ROOT / "outputs" / "demo"
SFT_MODEL, DEMO_PROMPTS = DEMO / "sft" / "model", DEMO / "data" / "rl.parquet"
SIDES = ("calibrl", "trl")

RATIOS = (("step_time", "step_s"), ("step_cpu_time", "step_cpu_s"),
          ("generation_time", "gen_s"), ("generation_cpu_time", "gen_cpu_s"),
          ("optimisation_time", "train_s"), ("optimisation_cpu_time", "train_cpu_s"),
          ("peak_rss", "peak_rss_mb"))
COLUMNS = (("step s", "step_s", ".3f"), ("gen s", "gen_s", ".3f"), ("optim s", "train_s", ".3f"),
           ("step cpu", "step_cpu_s", ".3f"), ("gen cpu", "gen_cpu_s", ".3f"),
           ("optim cpu", "train_cpu_s", ".3f"), ("tok/row", "tokens_per_row", ".1f"),
           ("RSS start MB", "rss_before_mb", ".0f"), ("RSS peak MB", "peak_rss_mb", ".0f"))


def require_trl() -> None:
    if importlib.util.find_spec("trl") is None:
        sys.exit(
            f"error: trl is not installed for {sys.executable}.\n"
            "This benchmark needs the 'bench' extra in its own venv (so TRL cannot change the "
            "main venv's transformers/accelerate):\n"
            "  python3 -m venv .venv-bench\n"
            "  .venv-bench/bin/pip install torch==2.13.0\n"
            "  .venv-bench/bin/pip install -e '.[bench]'\n"
            "  .venv-bench/bin/python benchmarks/train_step/bench_train_step.py"
        )


def prepare_model(args: argparse.Namespace, work: Path) -> tuple[Path, str]:
    """(model directory, how it was chosen)."""
    if args.model is not None:
        return args.model, "given with --model"
    if (SFT_MODEL / "config.json").is_file() and not args.random_model:
        return SFT_MODEL, "the demo's warm-up model (outputs/demo/sft/model)"
    from calibrl.models import create_tiny_model

    target = work / f"tiny-random-h{args.hidden}-l{args.layers}"
    if not (target / "config.json").is_file():
        create_tiny_model(target, seed=args.seed, overwrite=True, hidden_size=args.hidden,
                          num_layers=args.layers)
    why = "--random-model" if args.random_model else "no outputs/demo/sft/model yet"
    return target, f"random tiny model (hidden {args.hidden}, {args.layers} layers; {why})"


def prepare_data(args: argparse.Namespace, work: Path, model_dir: Path) -> Path:
    if args.data is not None:
        return args.data
    if model_dir == SFT_MODEL and DEMO_PROMPTS.is_file():  # prompts in the model's format
        return DEMO_PROMPTS
    out = work / "countdown"
    if not (out / "train.parquet").is_file():
        subprocess.run([sys.executable, "-m", "calibrl", "data", "countdown", "--n", "300",
                        "--numbers", "3..3", "--max-number", "20", "--seed", "0",
                        "--out", str(out)], check=True)
    return out / "train.parquet"


def run_side(side: str, spec: Spec, work: Path, tag: str) -> SideResult:
    spec_path, out_path = work / f"spec-{tag}.json", work / f"result-{side}-{tag}.json"
    log_path = work / f"log-{side}-{tag}.txt"
    spec.save(spec_path)
    out_path.unlink(missing_ok=True)
    with log_path.open("w") as log:
        proc = subprocess.run([sys.executable, str(HERE / f"{side}_side.py"), str(spec_path),
                               str(out_path)], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    if proc.returncode != 0 or not out_path.is_file():
        tail = "\n".join(log_path.read_text().splitlines()[-30:])
        sys.exit(f"error: the {side} side failed (exit {proc.returncode}); log {log_path}:\n{tail}")
    return SideResult.load(out_path)


def compare(spec: Spec, results: dict[str, list[SideResult]]) -> dict:
    """Per side: each round's summary and medians over all rounds' measured steps (memory: the
    largest over rounds); ratios TRL / calibrl."""
    out: dict = {"sides": {}}
    for side, rounds in results.items():
        summaries = [r.summary(spec.rows) for r in rounds]
        pooled = SideResult(side=side, warmup_steps=0,
                            steps=[s for r in rounds for s in r.measured()],
                            rss_before_mb=max(r.rss_before_mb for r in rounds),
                            peak_rss_mb=max(r.peak_rss_mb for r in rounds))
        out["sides"][side] = {"median": pooled.summary(spec.rows), "rounds": summaries,
                              "steps": [[asdict(s) for s in r.steps] for r in rounds],
                              "warmup_steps": spec.warmup_steps, "threads": rounds[0].threads,
                              "versions": rounds[0].versions}
    c, t = out["sides"]["calibrl"]["median"], out["sides"]["trl"]["median"]
    out["ratios_trl_over_calibrl"] = {
        **{name: t[key] / c[key] for name, key in RATIOS},
        "peak_rss_above_start": t["peak_minus_before_mb"] / max(c["peak_minus_before_mb"], 1e-9),
    }
    out["goal_calibrl_faster"] = c["step_s"] < t["step_s"] and c["step_cpu_s"] < t["step_cpu_s"]
    return out


def print_table(res: dict) -> None:
    print(f"{'':<14}" + "".join(f"{title:>13}" for title, _, _ in COLUMNS))
    for side in SIDES:
        m = res["sides"][side]["median"]
        print(f"{side:<14}" + "".join(f"{m[key]:>13{fmt}}" for _, key, fmt in COLUMNS))
    r = res["ratios_trl_over_calibrl"]
    print(f"{'TRL/calibrl':<14}" + "".join(
        f"{r[name]:>12.2f}x" if name else f"{'':>13}"
        for name in ("step_time", "generation_time", "optimisation_time", "step_cpu_time",
                     "generation_cpu_time", "optimisation_cpu_time", None, None, "peak_rss")))
    c = res["sides"]["calibrl"]["median"]
    if "score_s" in c and "optimizer_s" in c:
        print(f"calibrl step, medians: sampling {c['gen_s'] - c['score_s']:.3f} s, scoring "
              f"{c['score_s']:.3f} s, batch + forward/backward {c['train_s'] - c['optimizer_s']:.3f}"
              f" s, clip + optimiser + scheduler {c['optimizer_s']:.3f} s")
    if "rows_trained" in c:
        print(f"calibrl rows trained: {c['rows_trained']:.0%} (median step)")
    print(f"goal (calibrl faster per step, wall and CPU time) met: {res['goal_calibrl_faster']}")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, default=None,
                   help="model directory (default: outputs/demo/sft/model, else random tiny)")
    p.add_argument("--data", type=Path, default=None,
                   help="train parquet (default: outputs/demo/data/rl.parquet with the demo's "
                   "model, else 300 generated 3-number Countdown problems)")
    p.add_argument("--random-model", action="store_true",
                   help="use a random tiny model even when the warm-up model exists (it samples "
                   "to the length limit: a generation-heavy step)")
    p.add_argument("--hidden", type=int, default=256, help="random tiny model hidden size")
    p.add_argument("--layers", type=int, default=4, help="random tiny model layers")
    p.add_argument("--prompts", type=int, default=8, help="prompts per step")
    p.add_argument("--group", type=int, default=4, help="completions per prompt")
    p.add_argument("--max-tokens", type=int, default=64, help="max completion tokens")
    p.add_argument("--micro-batch", type=int, default=32, help="rows per forward/backward")
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads on both sides (1: CPU time stays meaningful on a "
                   "shared machine)")
    p.add_argument("--warmup-steps", type=int, default=1)
    p.add_argument("--steps", type=int, default=6, help="measured steps per round")
    p.add_argument("--rounds", type=int, default=3,
                   help="calibrl, TRL, calibrl, TRL, ...: alternating rounds even out drift")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-shared-context", dest="shared_context", action="store_false",
                   help="calibrl: run every row's context through the model (optim.shared_context "
                   "off)")
    p.add_argument("--no-skip-rows", dest="skip_rows", action="store_false",
                   help="calibrl: run every row through the forward/backward, also those whose "
                   "advantage is 0 (optim.skip_rows_without_gradient off)")
    p.add_argument("--work-dir", type=Path, default=ROOT / "outputs" / "bench-train-step")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "train_step.json")
    args = p.parse_args()
    require_trl()
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    model_dir, model_note = prepare_model(args, work)
    train_path = prepare_data(args, work, model_dir)
    spec = Spec(model_dir=str(model_dir.resolve()), train_path=str(train_path.resolve()),
                work_dir=str(work), prompts=args.prompts, group=args.group,
                max_tokens=args.max_tokens, micro_batch=args.micro_batch, lr=args.lr,
                precision=args.precision, threads=args.threads, warmup_steps=args.warmup_steps,
                steps=args.steps, seed=args.seed, shared_context=args.shared_context,
                skip_rows=args.skip_rows)
    print(f"model: {model_note}\n  {spec.model_dir}")
    results: dict[str, list[SideResult]] = {side: [] for side in SIDES}
    for i in range(args.rounds):
        for side in SIDES:
            print(f"round {i + 1}/{args.rounds}: {side} ... (load average "
                  f"{tuple(round(x, 2) for x in os.getloadavg())})", flush=True)
            results[side].append(run_side(side, spec, work, f"r{i}"))
    res = compare(spec, results)
    res["setup"] = {**asdict(spec), "model": model_note, "rounds": args.rounds,
                    "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
                    "machine": platform.machine(), "processor": platform.processor() or "?",
                    "command": " ".join([_rel(Path(sys.executable)), *sys.argv])}
    for key in ("model_dir", "train_path", "work_dir"):
        res["setup"][key] = _rel(Path(res["setup"][key]))
    print_table(res)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"load average (1, 5, 15 min) at the end: {res['setup']['loadavg_at_end']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
