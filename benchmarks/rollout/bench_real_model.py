"""Decoding a real pretrained model: calibrl's transformers engine against `model.generate`.

The same prompts (world-facts questions in the chat template), the same sampling (temperature,
top-p, new-token budget, n samples per prompt), timed after one warm-up call each; generated
tokens per second, counting each sample's tokens up to its end. With `--check-samples K`, both
paths also draw K samples for each of the prompts and the two samples are compared in
distribution: two-sample Kolmogorov-Smirnov distances of the sample lengths and of each sample's
log-likelihood under the model (one teacher-forced scorer for both sides), against the 1 %
critical distance. Writes a JSON file.

    .venv/bin/python benchmarks/rollout/bench_real_model.py --model models/smollm2-135m-instruct \\
        --data data/world_facts/test.parquet --out benchmarks/results/real_model_decode.json \\
        --check-samples 32
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


def _generate(model, tokenizer, prompts, args, n) -> list[list[int]]:
    """`n` samples per prompt from `model.generate`, each cut after its end token."""
    pad = tokenizer.pad_token_id
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                             temperature=args.temperature, top_p=args.top_p, top_k=0,
                             max_new_tokens=args.new_tokens, num_return_sequences=n,
                             pad_token_id=pad)
    config_ends = torch.tensor(model.generation_config.eos_token_id).flatten().tolist()
    ends = {tokenizer.eos_token_id, *config_ends}
    rows = []
    for row in out[:, width:].tolist():
        end = next((i + 1 for i, t in enumerate(row) if t in ends), len(row))
        rows.append(row[:end])
    return rows


def _log_likelihood(model, prompt: list[int], sample: list[int]) -> float:
    """Sum of log p(token) over `sample` after `prompt`, temperature 1."""
    ids = torch.tensor([prompt + sample])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0, len(prompt) - 1:-1].float(), dim=-1)
    return float(logp.gather(1, torch.tensor(sample)[:, None]).sum())


def _ks(a: list[float], b: list[float]) -> dict[str, float]:
    """Two-sample Kolmogorov-Smirnov distance and its 1 % critical value (asymptotic)."""
    xs = sorted(set(a) | set(b))
    sa, sb = torch.tensor(sorted(a)), torch.tensor(sorted(b))
    grid = torch.tensor(xs)
    cdf_a = torch.searchsorted(sa, grid, right=True) / len(a)
    cdf_b = torch.searchsorted(sb, grid, right=True) / len(b)
    distance = float((cdf_a - cdf_b).abs().max())
    critical = 1.628 * ((len(a) + len(b)) / (len(a) * len(b))) ** 0.5
    return {"distance": distance, "critical_1pct": critical, "same": distance < critical}


def _check_samples(engine, model, tokenizer, prompts, args) -> dict:
    """Both paths' samples, K per prompt, compared in distribution (module docstring)."""
    params = SamplingParams(n=args.check_samples, temperature=args.temperature,
                            top_p=args.top_p, max_new_tokens=args.new_tokens, seed=1)
    sampled = engine.generate(prompts, params)
    ours = [(p, g.token_ids) for p, gens in zip(prompts, sampled, strict=True) for g in gens]
    torch.manual_seed(1)
    rows = _generate(model, tokenizer, prompts, args, args.check_samples)
    theirs = [(prompts[i // args.check_samples], s) for i, s in enumerate(rows)]
    result = {"samples_per_side": len(ours)}
    for name, stat in (("length", lambda p, s: float(len(s))),
                       ("log_likelihood", lambda p, s: _log_likelihood(model, p, s))):
        result[name] = _ks([stat(p, s) for p, s in ours if s], [stat(p, s) for p, s in theirs if s])
    return result


def _time_generate(model, tokenizer, prompts, args) -> tuple[float, int]:
    start = time.perf_counter()
    rows = _generate(model, tokenizer, prompts, args, args.n)
    return time.perf_counter() - start, sum(len(r) for r in rows)


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
    parser.add_argument("--check-samples", type=int, default=0,
                        help="also compare K samples per prompt from each path in distribution")
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
    if args.check_samples:
        result["distribution"] = _check_samples(engine, model, tokenizer, prompts, args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("engine", "generate", "speedup_tokens_per_s",
                                             "distribution") if k in result},
                     indent=2))


if __name__ == "__main__":
    main()
