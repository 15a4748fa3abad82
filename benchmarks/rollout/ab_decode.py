"""Decoding time of this calibrl against an earlier commit's, in one process, interleaved.

On a shared 2-core machine two runs of the same code differ by 10-20 %, more than a speed-up
worth measuring, and a "before" process followed by an "after" process can land in different
phases of the neighbours' load. Here the earlier commit's package is extracted (`git archive`)
under another name (`calibrl_<commit>`, its imports rewritten), both are loaded into one
process, and the workloads of `bench_decode.py` (its `load` and `workloads`: probe, eval and
rollout on the demo's model) run old, new, old, new, ..., each call timed in the process's CPU
time. Prints the medians and their ratio; the two sides sample the same tokens when the change
is exact (also checked). `--fused` compares instead this calibrl's two decoding paths, the
exact one ("old") and `decode="fused"` ("new"), which round differently: their tokens may
differ now and then.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/rollout/ab_decode.py --base 8780e13
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/rollout/ab_decode.py --fused
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_decode  # noqa: E402  (the workloads and the loader, shared)


def extract(commit: str) -> str:
    """The package of `commit` as `calibrl_<commit>` on sys.path; returns its name."""
    name = f"calibrl_{re.sub(r'[^0-9A-Za-z]', '_', commit)}"
    where = Path(tempfile.mkdtemp())
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "src/calibrl"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    (where / "src" / "calibrl").rename(where / name)
    for path in (where / name).rglob("*.py"):
        text = re.sub(r"\b(from|import) calibrl\b", rf"\1 {name}", path.read_text())
        path.write_text(text)
    sys.path.insert(0, str(where))
    return name


def tokens_of(out) -> list:
    """Every generated token id, whatever the nesting (a probe's rows or an engine's lists)."""
    if hasattr(out, "token_ids"):
        return list(out.token_ids)
    if isinstance(out, (list, tuple)):
        return [tokens_of(x) for x in out]
    return [repr(out)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--base", help="the earlier commit")
    which.add_argument("--fused", action="store_true",
                       help="this calibrl's exact path against its fused one")
    p.add_argument("--model", help="model folder (default: the demo's warm-up model)")
    p.add_argument("--data", help="test split (default: the demo's)")
    p.add_argument("--rounds", type=int, nargs=3, default=(5, 15, 40),
                   metavar=("PROBE", "EVAL", "ROLLOUT"), help="old/new pairs per workload")
    args = p.parse_args()
    bench_args = bench_decode.make_parser().parse_args(
        [*(["--model", args.model] if args.model else []),
         *(["--data", args.data] if args.data else [])])
    old = "calibrl" if args.fused else extract(args.base)
    model, tokenizer, examples, _ = bench_decode.load(bench_args)
    sides = {"old": bench_decode.workloads(model, tokenizer, examples, bench_args, pkg=old)}
    if args.fused:
        bench_args.decode = "fused"
    sides["new"] = bench_decode.workloads(model, tokenizer, examples, bench_args)
    print(f"threads {torch.get_num_threads()}; " + (
        "old = exact path, new = fused path (the working tree)" if args.fused
        else f"old = {args.base}, new = the working tree"))
    for name, rounds in zip(("probe", "eval", "rollout"), args.rounds, strict=True):
        same = tokens_of(sides["old"][name]()) == tokens_of(sides["new"][name]())  # warm-up
        times: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(rounds):
            for side, fns in sides.items():
                start = time.process_time()
                fns[name]()
                times[side].append(time.process_time() - start)
        o, n = statistics.median(times["old"]), statistics.median(times["new"])
        print(f"{name}: CPU s per call, median of {rounds}: old {o:.4f}, new {n:.4f}, "
              f"old / new {o / n:.3f} (min {min(times['old']):.4f} vs {min(times['new']):.4f}); "
              f"same tokens: {same}", flush=True)


if __name__ == "__main__":
    main()
