"""A two-turn RLCR training step on a GPU, split into its parts, with and without gradient
checkpointing.

Random weights in the shape of Qwen2.5-0.5B or -1.5B (hidden size, layers, heads, MLP width),
written as calibrl's own Llama-style model with calibrl's tokenizer (so Countdown answers can
be scored; the vocabulary is ~2k tokens rather than Qwen's 152k, so the output layer is smaller
than the real model's), bf16 weights. 8 prompts x 8 answers x 4 confidences (`--prompts`,
`--ga`, `--gc`), `calibrl.training.trainer.Trainer.train_step()` in `two_turn` mode. For each
setting: step time split into generation (both turns' sampling), scoring, forward-backward
(batch, log-probs, loss, backward) and optimiser (clipping, step, schedule), generated tokens/s,
and peak GPU memory (`torch.cuda.max_memory_allocated`; on CPU peak RSS).

    .venv-gpu/bin/python benchmarks/gpu/bench_train_step.py --shape 0.5b   # on a GPU
    .venv/bin/python benchmarks/gpu/bench_train_step.py --tiny             # CPU smoke test

Writes benchmarks/results/gpu_train_step_<shape>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]

# calibrl's tiny-model sizes for the Qwen2.5 shapes (the vocabulary is calibrl's tokenizer's).
SHAPES: dict[str, dict[str, Any]] = {
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_layers=24, num_heads=14,
                 num_kv_heads=2),
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_layers=28, num_heads=12,
                 num_kv_heads=2),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4,
                 num_kv_heads=2),
}


def build_model(shape: str, out: Path, dtype: torch.dtype) -> Path:
    """Save a random model of `shape` with calibrl's tokenizer in `out`."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    from calibrl.models.sizes import TinyModelSizes
    from calibrl.models.tiny import tiny_config
    from calibrl.models.tokenizer import build_tokenizer

    tokenizer = build_tokenizer()
    sizes = object.__new__(TinyModelSizes)  # past the CPU family's parameter cap, same fields
    for k, v in {**TinyModelSizes().__dict__, **SHAPES[shape],
                 "max_position_embeddings": 4096}.items():
        object.__setattr__(sizes, k, v)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config(tokenizer, sizes), dtype=dtype)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_data(out: Path, n: int) -> Path:
    from calibrl.tasks import get_task
    from calibrl.tasks.files import write_splits

    train, _ = get_task("countdown").generate(n, seed=0, test_size=0, style="compact",
                                              num_numbers=(2, 4), max_number=30)
    return write_splits(out, {"train": train})["train"]


def overrides(args: argparse.Namespace, model: Path, data: Path, work: Path, ckpt: bool
              ) -> list[str]:
    bf16 = args.dtype == "bf16"
    return [
        "seed=0", f"model.path={model}", f"model.dtype={'bfloat16' if bf16 else 'float32'}",
        f"model.gradient_checkpointing={str(ckpt).lower()}",
        f"data.train_path={data}", "rollout.engine=hf",
        f"rollout.prompts_per_step={args.prompts}", f"rollout.num_generations_answer={args.ga}",
        f"rollout.num_generations_confidence={args.gc}",
        f"rollout.max_answer_tokens={args.answer_tokens}",
        f"rollout.max_confidence_tokens={args.confidence_tokens}",
        f"rollout.max_batch_size={args.prompts * args.ga * args.gc}",
        "algorithm.mode=two_turn", "algorithm.kl_coef=0.0",
        "optim.lr=1e-5", f"optim.total_steps={args.steps + 1}",
        f"optim.micro_batch_size={args.micro_batch}",
        f"optim.mixed_precision={'bf16' if bf16 else 'no'}",
        f"logging.output_dir={work}", f"logging.run_name=gpu-step-{'ckpt' if ckpt else 'plain'}",
        "logging.tensorboard=false", f"logging.log_every={10**9}",
        f"logging.samples_every={10**9}", "logging.num_samples=0", f"checkpoint.every={10**9}",
    ]


def measure(args: argparse.Namespace, model: Path, data: Path, work: Path, ckpt: bool) -> dict:
    import calibrl.training.trainer as trainer_module
    from calibrl.settings import TrainSettings, load_settings
    from calibrl.training.trainer import Trainer

    trainer = Trainer(load_settings(TrainSettings, None, overrides(args, model, data, work,
                                                                   ckpt)))
    parts: dict[str, list[float]] = {"score_s": [], "optimizer_s": []}

    def wrap(owner: Any, name: str, key: str) -> None:
        fn = getattr(owner, name)

        def timed(*a, **k):
            t0 = time.perf_counter()
            out = fn(*a, **k)
            parts[key].append(time.perf_counter() - t0)
            return out
        setattr(owner, name, timed)

    wrap(trainer_module, "score_tree", "score_s")
    wrap(trainer.accelerator, "clip_grad_norm_", "optimizer_s")
    wrap(trainer.optimizer, "step", "optimizer_s")
    wrap(trainer.scheduler, "step", "optimizer_s")
    device = trainer.accelerator.device
    steps = []
    for i in range(args.steps + 1):  # the first is a warm-up
        for v in parts.values():
            v.clear()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        m = trainer.train_step()
        score, opt = sum(parts["score_s"]), sum(parts["optimizer_s"])
        tokens = sum(m.get(f"{t}/length_mean", 0) * m.get(f"{t}/count", 0)
                     for t in ("answer", "confidence"))
        peak = (torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda"
                else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        if i > 0:
            steps.append({"step_s": m["time/step_s"], "generation_s": m["time/rollout_s"] - score,
                          "scoring_s": score,
                          "forward_backward_s": m["time/train_s"] - opt, "optimiser_s": opt,
                          "generated_tokens": tokens,
                          "generated_tok_per_s": tokens / max(m["time/rollout_s"] - score, 1e-9),
                          "peak_mb": peak})
    med = {k: statistics.median(s[k] for s in steps) for k in steps[0]}
    return {"median": med, "steps": steps, "device": str(device)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="0.5b")
    parser.add_argument("--tiny", action="store_true",
                        help="CPU smoke test: the tiny shape, fp32, short answers, 1 step")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--ga", type=int, default=8)
    parser.add_argument("--gc", type=int, default=4)
    parser.add_argument("--answer-tokens", type=int, default=256)
    parser.add_argument("--confidence-tokens", type=int, default=32)
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3, help="measured steps (after 1 warm-up)")
    parser.add_argument("--checkpointing", choices=["both", "on", "off"], default="both")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.tiny:
        args.shape, args.dtype, args.steps = "tiny", "fp32", 1
        args.prompts, args.ga, args.gc = 2, 2, 2
        args.answer_tokens, args.confidence_tokens, args.micro_batch = 8, 4, 4
    if not torch.cuda.is_available():
        torch.set_num_threads(1)
    out = args.out or ROOT / f"benchmarks/results/gpu_train_step_{args.shape}.json"
    work = Path(tempfile.mkdtemp(prefix="calibrl-gpu-step-"))
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    model = build_model(args.shape, work / "model", dtype)
    data = build_data(work / "data", 64)
    settings = {"both": [False, True], "on": [True], "off": [False]}[args.checkpointing]
    results = {}
    for ckpt in settings:
        name = "gradient_checkpointing" if ckpt else "plain"
        try:
            results[name] = measure(args, model, data, work / name, ckpt)
        except torch.OutOfMemoryError as e:  # the largest shape that trains is a result too
            results[name] = {"error": f"out of memory: {e}"[:300]}
        r = results[name]
        if "median" in r:
            m = r["median"]
            print(f"{name:24s} step {m['step_s']:.3f} s = generation {m['generation_s']:.3f} + "
                  f"scoring {m['scoring_s']:.3f} + forward-backward "
                  f"{m['forward_backward_s']:.3f} + optimiser {m['optimiser_s']:.3f}; "
                  f"{m['generated_tok_per_s']:,.0f} generated tok/s; peak {m['peak_mb']:,.0f} MB")
        else:
            print(f"{name:24s} {r['error']}")
    res = {"setup": {**{k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                     "shape_config": SHAPES[args.shape],
                     "device_name": torch.cuda.get_device_name(0) if torch.cuda.is_available()
                     else platform.processor() or platform.machine(),
                     "torch": torch.__version__, "loadavg": os.getloadavg()},
           "results": results}
    print(f"load average {tuple(round(x, 2) for x in res['setup']['loadavg'])}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
