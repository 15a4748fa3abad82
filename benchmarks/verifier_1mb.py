"""Countdown verifier on hostile inputs of about 1 MB: is every one scored in under 10 ms?

The README promises that `compute_score` scores every input in under 10 ms. This times it on
inputs built to defeat each stage (extraction, number validation, the character filter, the
parser, big-integer arithmetic), each about 1 MB, plus the big-integer cases near the
evaluator's bounds. Each input is scored `--repeats` times; the best time is the cost of the input
(the rest is other processes on the machine), the median is reported next to it.

    .venv/bin/python benchmarks/verifier_1mb.py [--repeats 15]

Writes benchmarks/results/verifier_1mb.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from calibrl.tasks.countdown import compute_score

ROOT = Path(__file__).resolve().parents[1]
MB = 1 << 20
PROMISE_MS = 10.0


def hostile_inputs() -> list[tuple[str, str, dict]]:
    """(name, solution string, ground truth); the strings are about 1 MB unless named otherwise."""
    t3 = {"target": 3, "numbers": [1, 2]}
    a = lambda body: f"<answer>{body}</answer>"  # noqa: E731
    return [
        ("text without tags", "x" * MB, t3),
        ("unclosed <answer> tags", "<answer>" * (MB // 8), t3),
        ("60k closed answers", a("1") * (MB // 17), t3),
        ("60k empty answers", a("") * (MB // 17), t3),
        ("newlines before answer", "Assistant: " + "\n" * MB + a("1+2"), t3),
        ("digits", a("9" * MB), t3),
        ("'1+' chain", a("1+" * (MB // 2) + "2"), t3),
        ("empty-tuple calls", a("(1)" + "()" * (MB // 2) + "+2"), t3),
        ("spaces inside", a("1" + " " * MB + "+2"), t3),
        ("tabs inside", a("1" + "\t" * MB + "+2"), t3),
        ("form feeds inside", a("1" + "\x0c" * MB + "+2"), t3),
        ("spaces in brackets", a("(" * 100 + "1" + " " * MB + ")" * 100 + "+2"), t3),
        ("newlines in brackets", a("(1" + "\r" * MB + "+2)"), t3),
        ("x1c separators", a("1" + "\x1c" * MB + "+2"), t3),
        ("spaced unary minus", a("- " * (MB // 2) + "1+2"), t3),
        ("dots", a("1+2" + "." * MB), t3),
        ("spaced dots", a("1+2" + " ." * (MB // 2)), t3),
        ("no-break spaces", a("1" + "\u00a0" * MB + "+2"), t3),
        ("em spaces", a("1" + "\u2003" * MB + "+2"), t3),
        ("arabic-indic digits", a("\u0661" * MB), t3),
        ("spaces and no-break spaces", a("1" + " \u00a0" * (MB // 2) + "+2"), t3),
        ("non-ASCII prompt, ASCII answer", "\u00e9" + a("1" + " " * MB + "+2"), t3),
        ("junk bytes", bytes(range(256)).decode("latin-1") * (MB // 256), t3),
        ("nested tags", a("<answer>" * (MB // 17) + "1+2" + "</answer>" * (MB // 17)), t3),
        # Short inputs at the integer bounds (58,807-bit and ~65,000-bit intermediates).
        ("1//64**(99*99)", a("1//64**(99*99)"), {"target": 0, "numbers": [1, 64, 99, 99]}),
        ("2**99**99", a("2**99**99"), {"target": 1, "numbers": [2, 99, 99]}),
        ("(99**98)**97", a("(99**98)**97"), {"target": 1, "numbers": [99, 98, 97]}),
        ("3**41000//(7**11000+1)", a("3**41000//(7**11000+1)"),
         {"target": 1, "numbers": [3, 41000, 7, 11000, 1]}),
        ("9**20000*9**20000", a("9**20000*9**20000"), {"target": 1, "numbers": [9, 20000] * 2}),
    ]


def _time_ms(text: str, truth: dict, repeats: int) -> tuple[float, float, float]:
    times, score = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        score = compute_score(text, truth)
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times), statistics.median(times), score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/verifier_1mb.json"))
    args = parser.parse_args()

    rows = []
    for name, text, truth in hostile_inputs():
        best, median, score = _time_ms(text, truth, args.repeats)
        rows.append({"input": name, "chars": len(text), "score": score,
                     "best_ms": round(best, 3), "median_ms": round(median, 3)})
        print(f"{name:34} {len(text):>9} chars  score={score!s:<4} best {best:6.2f} ms"
              f"  median {median:6.2f} ms")
    slowest = max(rows, key=lambda r: r["best_ms"])
    result = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
        "repeats": args.repeats,
        "promise_ms": PROMISE_MS,
        "slowest_input": slowest["input"],
        "slowest_best_ms": slowest["best_ms"],
        "all_within_promise": all(r["best_ms"] < PROMISE_MS for r in rows),
        "inputs": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"slowest: {slowest['input']} {slowest['best_ms']:.2f} ms "
          f"(promise {PROMISE_MS:.0f} ms); wrote {args.out}")


if __name__ == "__main__":
    main()
