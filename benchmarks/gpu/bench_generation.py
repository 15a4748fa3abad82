"""Generation speed on a GPU: calibrl's HF engine against transformers' `generate`.

Random weights in the shape of Qwen2.5-0.5B or -1.5B (built from a config: nothing is
downloaded), bf16, the same random prompts on both sides, every sample exactly `--new-tokens`
long (no end-of-sequence: random weights would end at random places, and equal lengths compare
like for like):

- turn 1: `--prompts` prompts x G_a samples. calibrl: `HFEngine.generate(n=G_a)` (each prompt
  encoded once, its cache expanded). transformers: `generate(num_return_sequences=G_a,
  do_sample=True)` on the left-padded batch.
- turn 2: every (prompt, answer, question) context x G_c samples of `--turn2-tokens` tokens.
  calibrl encodes each context once for its G_c samples; `generate(num_return_sequences=G_c)`
  encodes each one G_c times.

Reports generated tokens/s and peak GPU memory (`torch.cuda.max_memory_allocated`; on CPU the
process's peak RSS) for each, and the ratios against the goals of issue 27 (>= 1.5x turn 1,
>= 3x turn 2).

    .venv-gpu/bin/python benchmarks/gpu/bench_generation.py --shape 0.5b   # on a GPU
    .venv/bin/python benchmarks/gpu/bench_generation.py --tiny             # CPU smoke test

Writes benchmarks/results/gpu_generation_<shape>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]

# Qwen2.5 shapes (config.json of Qwen/Qwen2.5-0.5B and -1.5B); "tiny" for CPU smoke tests.
SHAPES: dict[str, dict[str, Any]] = {
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                 tie_word_embeddings=True),
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                 num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                 tie_word_embeddings=True),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
                 tie_word_embeddings=True),
}


class IdTokenizer:
    """Just what the engine needs without a vocabulary: no EOS, a pad id, a cheap decode."""

    eos_token_id = None
    pad_token_id = 0

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return " ".join(str(i) for i in ids)


def build_model(shape: str, device: torch.device, dtype: torch.dtype) -> Any:
    from transformers import AutoModelForCausalLM, GenerationConfig, Qwen2Config

    config = Qwen2Config(**SHAPES[shape], max_position_embeddings=4096, rope_theta=1e6,
                         use_sliding_window=False, bos_token_id=None, eos_token_id=None,
                         pad_token_id=0)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype).to(device).eval()
    model.generation_config = GenerationConfig(eos_token_id=None, pad_token_id=0)
    return model


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def hf_generate(model, prompts: list[list[int]], n: int, new_tokens: int, batch: int) -> int:
    """transformers' `generate`, `batch` prompts per call (left padding); generated tokens."""
    device = next(model.parameters()).device
    total = 0
    for start in range(0, len(prompts), batch):
        chunk = prompts[start:start + batch]
        width = max(len(p) for p in chunk)
        ids = torch.zeros((len(chunk), width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(chunk):
            ids[i, width - len(p):] = torch.tensor(p)
            mask[i, width - len(p):] = 1
        with torch.inference_mode():
            out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                 do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                                 num_return_sequences=n, max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, pad_token_id=0)
        total += (out.shape[1] - width) * out.shape[0]
    return total


def timed(device: torch.device, fn) -> tuple[float, Any, float]:
    reset_peak(device)
    synchronize(device)
    t0 = time.perf_counter()
    out = fn()
    synchronize(device)
    return time.perf_counter() - t0, out, peak_memory_mb(device)


def run(args: argparse.Namespace) -> dict:
    from calibrl.rollout.engine import SamplingParams
    from calibrl.rollout.hf_engine import HFEngine

    device = torch.device(args.device)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    model = build_model(args.shape, device, dtype)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(1, vocab, (args.prompt_tokens,), generator=gen).tolist()
               for _ in range(args.prompts)]
    question = torch.randint(1, vocab, (args.question_tokens,), generator=gen).tolist()
    engine = HFEngine(model, IdTokenizer(), max_batch_size=args.max_batch_size, eos_token_ids=())
    turn1 = SamplingParams(n=args.ga, temperature=1.0, max_new_tokens=args.new_tokens, seed=0)
    turn2 = SamplingParams(n=args.gc, temperature=1.0, max_new_tokens=args.turn2_tokens, seed=1)
    hf_batch = max(1, args.max_batch_size // args.ga)

    engine.generate(prompts[:1], SamplingParams(n=2, max_new_tokens=4, seed=0))  # warm-up
    hf_generate(model, prompts[:1], 2, 4, 1)
    results: dict[str, dict[str, float]] = {}
    s, answers, mem = timed(device, lambda: engine.generate(prompts, turn1))
    tokens = sum(len(g.token_ids) for gens in answers for g in gens)
    results["turn1_calibrl"] = {"s": s, "tokens": tokens, "tok_per_s": tokens / s,
                                "peak_mb": mem}
    s, tokens, mem = timed(device, lambda: hf_generate(model, prompts, args.ga, args.new_tokens,
                                                       hf_batch))
    results["turn1_transformers"] = {"s": s, "tokens": tokens, "tok_per_s": tokens / s,
                                     "peak_mb": mem}
    contexts = [p + g.token_ids + question for p, gens in zip(prompts, answers, strict=True)
                for g in gens]
    s, out, mem = timed(device, lambda: engine.generate(contexts, turn2))
    tokens = sum(len(g.token_ids) for gens in out for g in gens)
    results["turn2_calibrl"] = {"s": s, "tokens": tokens, "tok_per_s": tokens / s,
                                "peak_mb": mem}
    s, tokens, mem = timed(device, lambda: hf_generate(
        model, contexts, args.gc, args.turn2_tokens, max(1, args.max_batch_size // args.gc)))
    results["turn2_transformers"] = {"s": s, "tokens": tokens, "tok_per_s": tokens / s,
                                     "peak_mb": mem}
    ratios = {turn: results[f"{turn}_calibrl"]["tok_per_s"]
              / results[f"{turn}_transformers"]["tok_per_s"] for turn in ("turn1", "turn2")}
    return {
        "setup": {**vars(args), "shape_config": SHAPES[args.shape],
                  "parameters": sum(p.numel() for p in model.parameters()),
                  "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
                  else platform.processor() or platform.machine(),
                  "torch": torch.__version__, "loadavg": os.getloadavg()},
        "results": results, "calibrl_over_transformers": ratios,
        "goals_met": {"turn1 >= 1.5x": ratios["turn1"] >= 1.5, "turn2 >= 3x": ratios["turn2"] >= 3},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    parser.add_argument("--tiny", action="store_true",
                        help="CPU smoke test: the tiny shape, fp32, few short samples")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--ga", type=int, default=8, help="answers per prompt (turn 1)")
    parser.add_argument("--gc", type=int, default=4, help="confidences per answer (turn 2)")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--question-tokens", type=int, default=16)
    parser.add_argument("--turn2-tokens", type=int, default=32)
    parser.add_argument("--max-batch-size", type=int, default=256)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.tiny:
        args.shape, args.device, args.dtype = "tiny", "cpu", "fp32"
        args.prompts, args.prompt_tokens, args.new_tokens, args.turn2_tokens = 2, 8, 6, 4
        args.ga, args.gc = 2, 2
    if args.device == "cpu":
        torch.set_num_threads(1)
    out = args.out or ROOT / f"benchmarks/results/gpu_generation_{args.shape}.json"
    args.out = str(out)
    res = run(args)
    for name, r in res["results"].items():
        print(f"{name:20s} {r['tokens']:>8} tokens {r['s']:8.2f} s {r['tok_per_s']:>10,.0f} tok/s"
              f"  peak {r['peak_mb']:,.0f} MB")
    for turn, ratio in res["calibrl_over_transformers"].items():
        print(f"{turn}: calibrl / transformers = {ratio:.2f}x")
    print(f"goals met: {res['goals_met']}; device: {res['setup']['device_name']}; "
          f"load average {tuple(round(x, 2) for x in res['setup']['loadavg'])}")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
