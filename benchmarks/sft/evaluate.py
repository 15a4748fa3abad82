"""Greedy and sampled accuracy of an SFT model on held-out Countdown problems (strict verifier).

    .venv/bin/python benchmarks/sft/evaluate.py MODEL_DIR TEST.parquet [--n 500] [--out FILE]

Runs `calibrl.training.sft_check.check_model` (model.generate; turn 1, turn 2 on those answers,
single-turn RLCR) at temperature 0 and 1, prints the rates and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import asdict
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from calibrl.tasks.files import load_examples
from calibrl.training.sft_check import check_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("test", type=Path)
    parser.add_argument("--n", type=int, default=500, help="held-out problems (first N)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--out", type=Path, default=None, help="JSON file for the results")
    args = parser.parse_args()
    model = AutoModelForCausalLM.from_pretrained(args.model)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    problems = load_examples(args.test)[: args.n]
    results = []
    for temperature in (0.0, 1.0):
        start = time.perf_counter()
        result = check_model(model, tokenizer, problems, temperature=temperature, seed=args.seed)
        print("\n".join(result.lines()), f"({time.perf_counter() - start:.0f} s)", flush=True)
        results.append(asdict(result))
    if args.out is not None:
        record = {"model": str(args.model), "test": str(args.test), "seed": args.seed,
                  "torch": torch.__version__, "machine": platform.processor() or platform.machine(),
                  "results": results}
        args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
