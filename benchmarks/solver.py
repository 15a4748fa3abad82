"""Countdown solver speed: milliseconds per random instance, by count of numbers.

The solver's docstring says about a millisecond for 4 numbers and well under a second for 6
numbers without a solution. This times `solve` on seeded random instances (numbers 1-100, target
1-100) and reports the median and worst time per count, and the share solvable.

    .venv/bin/python benchmarks/solver.py [--instances 100]

Writes benchmarks/results/solver.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path

from calibrl.tasks.countdown.solver import solve

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/solver.json"))
    args = parser.parse_args()

    rows = []
    for count in (3, 4, 5, 6):
        rng = random.Random(count)
        times, solved = [], 0
        for _ in range(args.instances):
            numbers, target = [rng.randint(1, 100) for _ in range(count)], rng.randint(1, 100)
            t0 = time.perf_counter()
            solved += solve(numbers, target) is not None
            times.append((time.perf_counter() - t0) * 1e3)
        rows.append({"numbers": count, "instances": args.instances,
                     "solvable_share": solved / args.instances,
                     "median_ms": round(statistics.median(times), 3),
                     "max_ms": round(max(times), 3)})
        print(f"{count} numbers: median {rows[-1]['median_ms']:8.2f} ms, worst "
              f"{rows[-1]['max_ms']:8.2f} ms, {solved}/{args.instances} solvable")
    result = {"python": platform.python_version(), "machine": platform.machine(),
              "cpus": os.cpu_count(), "load_average_1min": os.getloadavg()[0], "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
