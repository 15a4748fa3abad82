"""Rollout engine throughput on a tiny random Qwen2: turn 1, turn 2, and what prefix reuse saves.

Turn 1 samples G_a answers per prompt. Turn 2 samples G_c confidences after every
(prompt, answer, question) context, three ways, in one run:
- naive: every one of the G_c samples re-encodes its whole context (G_c copies, n=1);
- reuse: each context is encoded once and its KV cache expanded to G_c rows (`generate`, n=G_c);
- tree: the prompt is encoded once per prompt and the answers branch off it
  (`generate_from_shared_prefix`), as the faithfulness probe does with truncation points.

Prefill work is counted in encoded tokens and timed by the engine (`EngineStats`); whole turn-2
wall time is reported too. Runs are interleaved and medians reported. EOS is disabled so every
sample has the same length and runs compare like for like.

    .venv/bin/python benchmarks/rollout/bench_rollout.py [--device cuda] [--repeats 3]

Writes benchmarks/results/rollout.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # the tiny tokenizer/model builders live with the tests

from calibrl.rollout.engine import SamplingParams  # noqa: E402
from calibrl.rollout.hf_engine import Branch, HFEngine  # noqa: E402
from rollout.tiny_lm import build_model, build_tokenizer  # noqa: E402

QUESTION = " How confident are you that your answer is correct? <analysis>"


def make_prompts(tokenizer, count: int, chars: int) -> list[list[int]]:
    base = "Using the numbers [{a}, {b}, {c}], create an equation that equals {t}. "
    return [tokenizer.encode((base.format(a=3 + i, b=5 + i, c=7, t=8 + i) * 50)[:chars])
            for i in range(count)]


def run(args: argparse.Namespace) -> dict:
    device = torch.device(args.device)
    tokenizer = build_tokenizer()
    model = build_model(len(tokenizer), hidden=args.hidden, layers=args.layers).to(device)
    engine = HFEngine(model, tokenizer, max_batch_size=args.max_batch_size, eos_token_ids=())
    prompts = make_prompts(tokenizer, args.prompts, args.prompt_chars)
    question = tokenizer.encode(QUESTION)
    turn1_params = SamplingParams(n=args.ga, max_new_tokens=args.turn1_tokens, seed=0)
    answers = engine.generate(prompts, turn1_params)  # also a warm-up run
    contexts = [p + g.token_ids + question for p, gens in zip(prompts, answers, strict=True)
                for g in gens]

    def turn1():
        engine.generate(prompts, turn1_params)

    def turn2(strategy: str):
        reuse = SamplingParams(n=args.gc, max_new_tokens=args.turn2_tokens, seed=1)
        if strategy == "naive":
            once = SamplingParams(n=1, max_new_tokens=args.turn2_tokens, seed=1)
            engine.generate([c for c in contexts for _ in range(args.gc)], once)
        elif strategy == "reuse":
            engine.generate(contexts, reuse)
        else:
            for p, gens in zip(prompts, answers, strict=True):
                branches = [Branch(None, tuple(g.token_ids + question)) for g in gens]
                engine.generate_from_shared_prefix(p, branches, reuse)

    runs = {"turn1": turn1, **{f"turn2_{s}": (lambda s=s: turn2(s))
                               for s in ("naive", "reuse", "tree")}}
    samples: dict[str, list[dict]] = {name: [] for name in runs}
    for _ in range(args.repeats):  # interleaved, so drifting machine load hits every run alike
        for name, fn in runs.items():
            engine.stats.reset()
            t0 = time.perf_counter()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            st = engine.stats
            samples[name].append({"wall_s": time.perf_counter() - t0,
                                  "prefill_s": st.prefill_seconds, "decode_s": st.decode_seconds,
                                  "prefill_tokens": st.prefill_tokens,
                                  "generated_tokens": st.generated_tokens})
    out: dict = {}
    for name, rows in samples.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        med["tokens_per_s"] = med["generated_tokens"] / med["wall_s"]
        out[name] = med
    naive, reuse, tree = out["turn2_naive"], out["turn2_reuse"], out["turn2_tree"]
    out["ratios"] = {
        "reuse_over_naive_prefill_tokens": reuse["prefill_tokens"] / naive["prefill_tokens"],
        "reuse_over_naive_prefill_s": reuse["prefill_s"] / naive["prefill_s"],
        "reuse_over_naive_turn2_wall": reuse["wall_s"] / naive["wall_s"],
        "tree_over_naive_prefill_tokens": tree["prefill_tokens"] / naive["prefill_tokens"],
        "tree_over_naive_prefill_s": tree["prefill_s"] / naive["prefill_s"],
        "tree_over_naive_turn2_wall": tree["wall_s"] / naive["wall_s"],
        "goal_prefill_tokens_at_most": 1 / args.gc,
    }
    out["goal_met"] = out["ratios"]["reuse_over_naive_prefill_tokens"] <= 1 / args.gc + 1e-12
    out["setup"] = {"loadavg": [round(x, 2) for x in os.getloadavg()],**{k: _rel(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                    "vocab": len(tokenizer),
                    "mean_prompt_tokens": sum(map(len, prompts)) / len(prompts),
                    "mean_turn2_context_tokens": sum(map(len, contexts)) / len(contexts),
                    "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "machine": platform.machine(), "python": platform.python_version(),
                    "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
                    else platform.processor() or "cpu"}
    return out


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def print_table(res: dict) -> None:
    print(f"{'run':<14}{'wall s':>9}{'prefill s':>11}{'decode s':>10}{'prefill tok':>13}"
          f"{'gen tok':>9}{'gen tok/s':>11}")
    for name in ("turn1", "turn2_naive", "turn2_reuse", "turn2_tree"):
        r = res[name]
        print(f"{name:<14}{r['wall_s']:>9.3f}{r['prefill_s']:>11.3f}{r['decode_s']:>10.3f}"
              f"{r['prefill_tokens']:>13.0f}{r['generated_tokens']:>9.0f}{r['tokens_per_s']:>11.0f}")
    for k, v in res["ratios"].items():
        print(f"{k:<36}{v:.4f}")
    print(f"goal (reuse prefill tokens <= 1/G_c) met: {res['goal_met']}")
    print(f"load average (1, 5, 15 min): {res['setup']['loadavg']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--prompt-chars", type=int, default=300, help="prompt length in characters")
    p.add_argument("--ga", type=int, default=4, help="answers per prompt (G_a)")
    p.add_argument("--gc", type=int, default=8, help="confidences per answer (G_c)")
    p.add_argument("--turn1-tokens", type=int, default=64)
    p.add_argument("--turn2-tokens", type=int, default=16)
    p.add_argument("--max-batch-size", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (1: steady timings on a shared machine)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "rollout.json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    res = run(args)
    print_table(res)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2, default=str) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
