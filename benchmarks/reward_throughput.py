"""Countdown reward throughput: calibrl vs a plain `eval` implementation of the same semantics.

Scores 100k mixed answers (realistic model outputs: correct, wrong value, wrong numbers, missing
tags, answer not on the last line, bad characters, division by zero) with both, checks they agree
on every one, and prints the throughput ratio and calibrl's slowest single input. Hostile inputs
(1 MB strings, power towers, regex killers) are timed for calibrl only: the eval version hangs or
goes quadratic on them.

    .venv/bin/python benchmarks/reward_throughput.py [--n 100000]

Writes benchmarks/results/reward_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the eval-based oracle lives with the tests

from calibrl.tasks.countdown import compute_score  # noqa: E402
from reference import countdown_eval as ref  # noqa: E402

PROMPT = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
          "Using the numbers {nums}, create an equation that equals {target}.<|im_end|>\n"
          "<|im_start|>assistant\n")


def _answer(rng: random.Random, nums: list[int]) -> tuple[str, int]:
    a, b, c = nums
    kind = rng.randrange(8)
    target = a + b - c
    think = "<think>\n" + "\n".join(
        f"{rng.randint(1, 99)} + {rng.randint(1, 99)} = {rng.randint(1, 200)}"
        for _ in range(rng.randint(2, 8))) + "\n</think>\n"
    eq = {
        0: f"{a} + {b} - {c}",  # correct
        1: f"({a} + {b}) - {c}",  # correct
        2: f"{a} * {b} - {c}",  # wrong value
        3: f"{a} + {b}",  # missing number
        4: f"{a} / ({b} - {b}) + {c}",  # reused number
        5: f"{a} + {b} - {c} = {target}",  # bad character
        6: f"{a}.0 + {b} - {c}",  # 4.0 reads as two numbers
        7: f"{a} / ({b} - {b} + {c} - {c})",  # division by zero, wrong numbers
    }[kind]
    tail = rng.choice([f"<answer>{eq}</answer>", f"<answer> {eq} </answer>",
                       f"<answer>{eq}</answer>\nDone.", f"The answer is {eq}"])
    return PROMPT.format(nums=nums, target=target) + think + tail, target


def mixed_inputs(n: int, seed: int = 0) -> list[tuple[str, dict]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        nums = [rng.randint(1, 99) for _ in range(3)]
        text, target = _answer(rng, nums)
        out.append((text, {"target": target, "numbers": nums}))
    return out


def hostile_inputs() -> list[tuple[str, str, dict]]:
    mb = 1 << 20
    truth = {"target": 3, "numbers": [1, 2]}
    tower = {"target": 1, "numbers": [99, 98, 97]}
    return [
        ("1 MB of text", "x" * mb, truth),
        ("1 MB of unclosed <answer>", "<answer>" * (mb // 8), truth),
        ("1 MB of newlines", "\n" * mb + "<answer>1+2</answer>", truth),
        ("1 MB of digits in answer", "<answer>" + "9" * mb + "</answer>", truth),
        ("1 MB of '1+'", "<answer>" + "1+" * (mb // 2) + "2</answer>", truth),
        ("1 MB of calls", "<answer>(1)" + "()" * (mb // 2) + "+2</answer>", truth),
        ("1 MB of spaces", "<answer>1" + " " * mb + "+2</answer>", truth),
        ("99**98**97", "<answer>99**98**97</answer>", tower),
        ("((99**98)**97)", "<answer>((99**98)**97)</answer>", tower),
        ("2**99**99", "<answer>2**99**99</answer>", {"target": 1, "numbers": [2, 99, 99]}),
        ("junk bytes", bytes(range(256)).decode("latin-1") * 4096, truth),
    ]


def _timed(fn, items):
    worst, worst_item = 0.0, None
    start = time.perf_counter()
    for text, truth in items:
        t0 = time.perf_counter()
        fn(text, truth)
        dt = time.perf_counter() - t0
        if dt > worst:
            worst, worst_item = dt, text[:60]
    return time.perf_counter() - start, worst, worst_item


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/reward_throughput.json"))
    args = parser.parse_args()

    items = mixed_inputs(args.n)
    disagreements = sum(compute_score(t, g) != ref.compute_score(t, g) for t, g in items)
    ours_s, ours_worst, ours_worst_item = _timed(compute_score, items)
    ref_s, ref_worst, _ = _timed(ref.compute_score, items)
    hostile = []
    for name, text, truth in hostile_inputs():
        t0 = time.perf_counter()
        score = compute_score(text, truth)
        hostile.append({"input": name, "score": score, "ms": (time.perf_counter() - t0) * 1e3})

    result = {
        "n": args.n,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "disagreements_with_eval_reference": disagreements,
        "calibrl_per_s": args.n / ours_s,
        "eval_reference_per_s": args.n / ref_s,
        "throughput_ratio_calibrl_over_eval": ref_s / ours_s,
        "calibrl_slowest_mixed_ms": ours_worst * 1e3,
        "calibrl_slowest_mixed_input": ours_worst_item,
        "eval_reference_slowest_mixed_ms": ref_worst * 1e3,
        "hostile": hostile,
        "calibrl_slowest_hostile_ms": max(h["ms"] for h in hostile),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")

    print(f"{args.n} mixed answers, {disagreements} disagreements with the eval reference")
    print(f"  calibrl: {result['calibrl_per_s']:,.0f}/s (slowest {ours_worst * 1e3:.2f} ms)")
    print(f"  eval:    {result['eval_reference_per_s']:,.0f}/s (slowest {ref_worst * 1e3:.2f} ms)")
    print(f"  ratio calibrl/eval throughput: {result['throughput_ratio_calibrl_over_eval']:.2f}x")
    print("hostile inputs (calibrl only):")
    for h in hostile:
        print(f"  {h['input']:<28} score={h['score']:<4} {h['ms']:8.2f} ms")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
