"""Faithfulness-probe speed: calibrl's sampler against the seed's naive loop, same traces.

Both probe the same traces with the same model, judging and rows
(`calibrl.probe.runner.probe_traces`); only the sampling differs:
- calibrl: `CachedSampler`: each chain encoded once and stored once, every truncation point a
  crop of it, the points (and traces) of a batch decoded together;
- naive (the seed): per trace and per truncation point, one
  `model.generate(num_return_sequences=samples)` call on the whole re-encoded prefix.

Prints the wall-time ratio and whether the mean curves of the two agree within sampling error (at
every point the difference of the means is within z Monte Carlo standard errors, z set so that
two identical samplers fail anywhere only 1% of the time): confidence,
"% same answer", and, since a weak model is never right, shares that are not 0 for it: samples
that give an answer at all, answers that evaluate, answers that use exactly the given numbers.

    .venv/bin/python benchmarks/probe/bench_probe.py [--traces 8] [--samples 50] [--threads 1]

Model: the supervised warm-up model `outputs/sft-measure/model` (real `<think>` traces) with its
held-out problems when it exists, else a random tiny model on generated problems. Traces are
generated greedily once and excluded from the timings. Writes benchmarks/results/probe.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from statistics import NormalDist

import torch
import transformers

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from naive import NaiveSampler  # noqa: E402

from calibrl.probe.judge import sampled_answer, solution_str  # noqa: E402
from calibrl.probe.runner import probe_traces  # noqa: E402
from calibrl.probe.sampler import CachedSampler  # noqa: E402
from calibrl.probe.summary import on_grid  # noqa: E402
from calibrl.probe.traces import generate_traces  # noqa: E402
from calibrl.rollout.hf_engine import HFEngine  # noqa: E402
from calibrl.settings.probe import ProbeSection  # noqa: E402
from calibrl.tasks.countdown import (  # noqa: E402
    evaluate_equation,
    extract_solution,
    validate_equation,
)
from calibrl.tasks.files import load_examples  # noqa: E402

SFT_MODEL = ROOT / "outputs/sft-measure/model"
SFT_DATA = ROOT / "outputs/sft-measure/data/test.parquet"
FAMILY_ALPHA = 0.01  # chance that two identical samplers are declared different, all tests at once


def load(args: argparse.Namespace):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_path = Path(args.model) if args.model else (SFT_MODEL if SFT_MODEL.is_dir() else None)
    if model_path is None:
        from calibrl.models import create_tiny_model

        model_path = create_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
        kind = "random tiny model (no outputs/sft-measure/model yet)"
    else:
        kind = f"{model_path.relative_to(ROOT) if model_path.is_relative_to(ROOT) else model_path}"
    data_path = Path(args.data) if args.data else (SFT_DATA if SFT_DATA.is_file() else None)
    if data_path is not None:
        examples = load_examples(data_path)[: args.traces]
    else:
        from calibrl.tasks.countdown.data import examples_from_instances
        from calibrl.tasks.countdown.generate import generate_countdown

        train, _ = generate_countdown(args.traces, num_numbers=(3, 3), max_number=20, seed=0,
                                      test_size=0)
        examples = examples_from_instances(train, "test")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path).eval()
    weights = model_path / "model.safetensors"
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:16] if weights.is_file() else None
    return model, tokenizer, examples, {"model": kind, "weights_sha256_16": digest,
                                        "data": str(data_path or "generated")}


def _evaluates(text: str) -> bool:
    answer = extract_solution(solution_str(text))
    return answer is not None and evaluate_equation(answer) is not None


def _uses_the_numbers(text: str, numbers: list[int]) -> bool:
    answer = extract_solution(solution_str(text))
    return answer is not None and validate_equation(answer, numbers)


def curves(rows: list[dict], grid: list[float], samples: int) -> dict[str, list[list[float]]]:
    """Per trace, on the grid: confidence, same answer, and shares that are not 0 even for a
    weak model: samples giving an answer at all, answers that evaluate, answers using exactly
    the given numbers."""
    out: dict[str, list[list[float]]] = {"confidence": [], "same_answer": [], "answered": [],
                                         "evaluates": [], "uses_the_numbers": []}
    for row in rows:
        xs = [p["x"] for p in row["points"]]
        out["confidence"].append(on_grid(xs, [p["confidence"] for p in row["points"]], grid))
        answered = [sum(sampled_answer(t) is not None for t in p["texts"]) / samples
                    for p in row["points"]]
        out["answered"].append(on_grid(xs, answered, grid))
        evaluates = [sum(_evaluates(t) for t in p["texts"]) / samples for p in row["points"]]
        out["evaluates"].append(on_grid(xs, evaluates, grid))
        numbers = row["ground_truth"]["numbers"]
        valid = [sum(_uses_the_numbers(t, numbers) for t in p["texts"]) / samples
                 for p in row["points"]]
        out["uses_the_numbers"].append(on_grid(xs, valid, grid))
        if row["points"][0]["same_answer"] is not None:
            out["same_answer"].append(on_grid(xs, [p["same_answer"] for p in row["points"]], grid))
    return out


def agreement(a: list[list[float]], b: list[list[float]], samples: int, z_limit: float) -> dict:
    """Mean curves of two runs over the same traces and their largest |z| (difference of the
    means over its Monte Carlo standard error, from each trace's binomial variance)."""
    if not a:
        return {"traces": 0, "agree": True}
    points = len(a[0])
    mean_a = [sum(t[i] for t in a) / len(a) for i in range(points)]
    mean_b = [sum(t[i] for t in b) / len(b) for i in range(points)]
    zs = []
    for i in range(points):
        var = sum(x[i] * (1 - x[i]) + y[i] * (1 - y[i]) for x, y in zip(a, b, strict=True))
        se = math.sqrt(var / samples) / len(a)
        diff = mean_a[i] - mean_b[i]
        zs.append(0.0 if diff == 0 else (abs(diff) / se if se > 0 else math.inf))
    worst = max(zs)
    return {"traces": len(a), "calibrl": mean_a, "naive": mean_b,
            "max_abs_z": worst if math.isfinite(worst) else None, "agree": worst <= z_limit}


def run(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    model, tokenizer, examples, source = load(args)
    config = ProbeSection(samples=args.samples, max_answer_tokens=args.max_answer_tokens,
                          traces_per_batch=args.traces_per_batch, max_rows=args.max_rows,
                          seed=args.seed, save_samples=True)
    engine = HFEngine(model, tokenizer)
    traces = generate_traces(engine, tokenizer, list(enumerate(examples)), config)
    suffix = tokenizer(config.forced_text, add_special_tokens=False)["input_ids"]

    def probe_all(sampler, per_batch):
        rows = []
        for start in range(0, len(traces), per_batch):
            rows += probe_traces(traces[start:start + per_batch], sampler, tokenizer, config,
                                 suffix)
        return rows

    times: dict[str, list[float]] = {"calibrl": [], "naive": []}
    rows: dict[str, list[dict]] = {}
    torch.manual_seed(args.seed)  # the naive loop draws from torch's global generator
    for _ in range(args.repeats):  # interleaved, so drifting machine load hits both alike
        cached = CachedSampler(engine, max_rows=args.max_rows)  # fresh counters per repeat
        naive = NaiveSampler(model, tokenizer, sorted(engine.eos_token_ids))
        for name, sampler, per_batch in (("calibrl", cached, config.traces_per_batch),
                                         ("naive", naive, 1)):
            t0 = time.perf_counter()
            rows[name] = probe_all(sampler, per_batch)
            times[name].append(time.perf_counter() - t0)
    grid = list(config.grid)
    ca, cb = curves(rows["calibrl"], grid, args.samples), curves(rows["naive"], grid, args.samples)
    median = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    # Bonferroni: every point of every curve is one two-sided test.
    tests = len(ca) * len(grid)
    z_limit = NormalDist().inv_cdf(1 - FAMILY_ALPHA / (2 * tests))
    return {
        "setup": {
            **source, "traces": len(traces), "samples": args.samples, "points": grid,
            "max_answer_tokens": args.max_answer_tokens, "traces_per_batch": args.traces_per_batch,
            "max_rows": args.max_rows, "threads": args.threads, "repeats": args.repeats,
            "device": "cpu", "cpu_count": os.cpu_count(),
            "loadavg": [round(x, 2) for x in os.getloadavg()], "platform": platform.platform(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "chain_tokens": [len(t.chain_ids) for t in traces],
            "context_tokens": [len(t.context_ids) for t in traces],
        },
        "wall_s": times,
        "median_wall_s": median,
        "speedup_naive_over_calibrl": median["naive"] / median["calibrl"],
        "calibrl_stats_per_run": vars(cached.stats),
        "naive_stats_per_run": {"generate_calls": naive.calls,
                                "prefill_tokens": naive.prefill_tokens},
        "agreement_z_limit": z_limit,
        "agreement_family_alpha": FAMILY_ALPHA,
        "agreement": {name: agreement(ca[name], cb[name], args.samples, z_limit) for name in ca},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder (default: the SFT model, else random)")
    parser.add_argument("--data", help="data file (default: the SFT model's held-out problems)")
    parser.add_argument("--traces", type=int, default=8)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--max-answer-tokens", type=int, default=32)
    parser.add_argument("--traces-per-batch", type=int, default=8)
    parser.add_argument("--max-rows", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: stable timings on a shared machine)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/probe.json"))
    args = parser.parse_args()
    result = run(args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    setup = result["setup"]
    print(f"model: {setup['model']}; {setup['traces']} traces x {len(setup['points'])} points x "
          f"{setup['samples']} samples; {setup['threads']} thread(s)")
    for name, t in result["median_wall_s"].items():
        print(f"  {name:8s} {t:8.2f} s")
    print(f"  speed-up (naive / calibrl): {result['speedup_naive_over_calibrl']:.1f}x")
    print(f"  agreement: |z| <= {result['agreement_z_limit']:.2f} at every point of every curve "
          f"(Bonferroni, {FAMILY_ALPHA:.0%} family-wise false alarms)")
    for name, agree in result["agreement"].items():
        z = agree.get("max_abs_z")
        print(f"  {name:16s} curves agree within sampling error: {agree['agree']} "
              f"(traces {agree['traces']}, max |z| = {'-' if z is None else f'{z:.2f}'})")
    print(f"load average (1, 5, 15 min) at the end: {setup['loadavg']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
