"""Decoding a real pretrained model: calibrl's transformers engine against `model.generate`.

The same prompts (world-facts questions in the chat template), the same sampling (temperature,
top-p, new-token budget, n samples per prompt), timed after one warm-up call each; generated
tokens per second, counting each sample's tokens up to its end. Writes a JSON file.

    .venv/bin/python benchmarks/rollout/bench_real_model.py --model models/smollm2-135m-instruct \\
        --data data/world_facts/test.parquet --out benchmarks/results/real_model_decode.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from calibrl.models.loading import load_policy
from calibrl.rollout.engine import SamplingParams
from calibrl.rollout.factory import make_engine
from calibrl.rollout.rollouts import encode_messages
from calibrl.tasks.files import load_examples


def _time_engine(engine, prompts, params) -> tuple[float, int]:
    start = time.perf_counter()
    out = engine.generate(prompts, params)
    return time.perf_counter() - start, sum(len(g.token_ids) for gens in out for g in gens)


def _time_generate(model, tokenizer, prompts, args) -> tuple[float, int]:
    pad = tokenizer.pad_token_id
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                             temperature=args.temperature, top_p=args.top_p, top_k=0,
                             max_new_tokens=args.new_tokens, num_return_sequences=args.n,
                             pad_token_id=pad)
    seconds = time.perf_counter() - start
    new = out[:, width:]
    ends = tokenizer.eos_token_id
    tokens = 0
    for row in new.tolist():
        tokens += next((i + 1 for i, t in enumerate(row) if t == ends), len(row))
    return seconds, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--n", type=int, default=2, help="samples per prompt")
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-p", type=float, default=0.9)
    parser.add_argument("--decode", default="exact", choices=["exact", "fused"])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    model, tokenizer = load_policy(args.model)
    model.eval()
    examples = load_examples(args.data)[: args.prompts]
    prompts = [encode_messages(tokenizer, e.messages) for e in examples]
    engine = make_engine("hf", model, tokenizer, decode=args.decode)
    params = SamplingParams(n=args.n, temperature=args.temperature, top_p=args.top_p,
                            max_new_tokens=args.new_tokens, seed=0)
    _time_engine(engine, prompts[:2], params)  # warm-up
    _time_generate(model, tokenizer, prompts[:2], args)
    engine_s, engine_tokens = _time_engine(engine, prompts, params)
    generate_s, generate_tokens = _time_generate(model, tokenizer, prompts, args)
    result = {
        "settings": vars(args), "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "engine": {"seconds": engine_s, "tokens": engine_tokens,
                   "tokens_per_s": engine_tokens / engine_s},
        "generate": {"seconds": generate_s, "tokens": generate_tokens,
                     "tokens_per_s": generate_tokens / generate_s},
    }
    result["speedup_tokens_per_s"] = (result["engine"]["tokens_per_s"]
                                      / result["generate"]["tokens_per_s"])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("engine", "generate", "speedup_tokens_per_s")},
                     indent=2))


if __name__ == "__main__":
    main()
