"""CPU decoding against the machine's matmul-bound limit, for the shared decode loop.

The loop (`calibrl.rollout.decode.decode_rows`) is what the probe, the RL rollout and the
evaluation spend their time in. Three workloads on the same model and prompts:

- probe: `CachedSampler` on the model's own greedy traces, 11 truncation points x 50 samples,
  32 answer tokens (the probe's settings), `traces_per_batch` traces at once;
- eval: `HFEngine.generate`, 2 samples per prompt, 64 answer tokens, 64 rows at once (`calibrl
  eval`'s turn 1);
- rollout: `HFEngine.generate`, 8 prompts x 4 samples, 48 answer tokens (the demo's RL turn 1).

For each: generated tokens per second of decoding (time inside `decode_rows`) and the
matmul-bound limit at the same batch shape: FLOPs per token = 2 x the weights of every linear
layer (the LM head included, attention over the cache not counted), divided into the rate at
which this machine multiplies `[R, in] @ [in, out]` for exactly those weights on one thread, R
= the mean rows per decoding step. The ratio generated tok/s / limit is the figure of merit.
Each run's matmul rate is measured in the same process right after it, both per second of wall
time and per second of the process's CPU time; the CPU-time ratio (the one reported first in
BENCHMARKS.md) is not diluted when other jobs take the cores, the wall-time one is printed too.
A second CPU-time ratio holds the run to the rate of the same products through oneDNN with
packed weights, which `decode="fused"` uses for its wide products (quicker than `torch.mm` on
the project's AMD machine): the fair limit for that path.

A second, instrumented run of each workload gives the profile: the linear layers (timed around
each matrix product), attention, the rest of the model's forward (norms, rotary, embedding),
sampling, stop checks, row selection and the loop's own bookkeeping.

The samples' digest (sha256 of every generated token id) is printed and saved: the same
model, data and seeds must give the same digest before and after a speed-up.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/rollout/bench_decode.py [--model DIR] [--tiny]
        [--decode exact|fused]

Default model: the demo's warm-up `outputs/demo/sft/model` and its test split; `--tiny` (or no
demo model): a random model of the demo's shape (hidden 192, 4 layers, 4 heads) on generated
problems. `--decode fused` measures the quicker step that rounds differently
(`calibrl.rollout.fused_forward`; its samples' digest differs from the exact path's). Writes
benchmarks/results/decode.json (`--decode fused`: decode_fused.json).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import json
import os
import platform
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
import transformers

ROOT = Path(__file__).resolve().parents[2]

from calibrl.rollout import decode as decode_mod  # noqa: E402
from calibrl.tasks.files import load_examples  # noqa: E402

DEMO_MODEL = ROOT / "outputs/demo/sft/model"
DEMO_DATA = ROOT / "outputs/demo/data/test.parquet"
DEMO_SHAPE = {"hidden_size": 192, "num_layers": 4, "num_heads": 4}


def load(args: argparse.Namespace) -> tuple[Any, Any, list, dict]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_path = Path(args.model) if args.model else DEMO_MODEL
    if args.tiny or not model_path.is_dir():
        from calibrl.models import create_tiny_model

        model_path = create_tiny_model(Path(tempfile.mkdtemp()) / "tiny", **DEMO_SHAPE)
        kind = "random model of the demo's shape (hidden 192, 4 layers, 4 heads)"
    else:
        kind = str(model_path.relative_to(ROOT) if model_path.is_relative_to(ROOT) else model_path)
    data_path = Path(args.data) if args.data else DEMO_DATA
    if not args.tiny and data_path.is_file():
        examples = load_examples(data_path)[:args.prompts]
    else:
        from calibrl.tasks.countdown.data import examples_from_instances
        from calibrl.tasks.countdown.generate import generate_countdown

        train, _ = generate_countdown(args.prompts, num_numbers=(2, 4), max_number=30, seed=0,
                                      test_size=0)
        examples = examples_from_instances(train, "test")
        data_path = None
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path).eval()
    weights = Path(model_path) / "model.safetensors"
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:16] if weights.is_file() else None
    return model, tokenizer, examples, {"model": kind, "weights_sha256_16": digest,
                                        "data": str(data_path or "generated")}


# --- the matmul-bound limit -------------------------------------------------------------------

def linear_weights(model: torch.nn.Module) -> list[torch.Tensor]:
    """The weight `[out, in]` of every linear layer a token goes through (LM head included)."""
    return [m.weight.detach() for m in model.modules() if isinstance(m, torch.nn.Linear)]


def flops_per_token(model: torch.nn.Module) -> int:
    return sum(2 * w.shape[0] * w.shape[1] for w in linear_weights(model))


def matmul_rate(model: torch.nn.Module, rows: int, seconds: float = 0.5
                ) -> tuple[float, float, float]:
    """FLOP/s of `[rows, in] @ W.T` for every linear weight of the model in turn (fp32, the
    current thread count), over a window of `seconds`: per second of wall time, per second of
    this process's CPU time (not diluted by other jobs taking the cores), and in the fastest
    single pass over the weights (the machine at its best)."""
    weights = linear_weights(model)
    inputs = {w.shape[1]: torch.randn(rows, w.shape[1]) for w in weights}
    outs = [torch.empty(rows, w.shape[0]) for w in weights]
    flops = rows * flops_per_token(model)
    passes, best = 0, float("inf")
    with torch.inference_mode():
        for w, out in zip(weights, outs, strict=True):  # warm-up
            torch.mm(inputs[w.shape[1]], w.t(), out=out)
        wall, cpu = time.perf_counter(), time.process_time()
        while passes == 0 or time.perf_counter() - wall < seconds:
            t0 = time.perf_counter()
            for w, out in zip(weights, outs, strict=True):
                torch.mm(inputs[w.shape[1]], w.t(), out=out)
            best = min(best, time.perf_counter() - t0)
            passes += 1
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return flops * passes / wall, flops * passes / max(cpu, 1e-9), flops / best


def onednn_rate(model: torch.nn.Module, rows: int, seconds: float = 0.5) -> float | None:
    """FLOP/s per second of CPU time of the same products through oneDNN with packed weights
    (what `decode="fused"` runs its wide products with, quicker than `torch.mm` on some CPUs):
    the limit the fused path could be held to instead. None where oneDNN is missing."""
    if not (torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")):
        return None
    product = torch.ops.mkldnn._linear_pointwise
    weights = linear_weights(model)
    with torch.inference_mode():
        packed = [torch.ops.mkldnn._reorder_linear_weight(w) for w in weights]
        inputs = [torch.randn(rows, w.shape[1]) for w in weights]
        for p, x in zip(packed, inputs, strict=True):  # warm-up
            product(x, p, None, "none", [], "")
        passes, cpu = 0, time.process_time()
        wall = time.perf_counter()
        while passes == 0 or time.perf_counter() - wall < seconds:
            for p, x in zip(packed, inputs, strict=True):
                product(x, p, None, "none", [], "")
            passes += 1
        cpu = time.process_time() - cpu
    return rows * flops_per_token(model) * passes / max(cpu, 1e-9)


# --- the profile --------------------------------------------------------------------------------

class Profile:
    """Seconds per named part; `part(name)` times a block (nested parts are subtracted)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[float]] = []  # [start, time spent in children]

    def push(self) -> None:
        """Start timing a part (ended by `pop`)."""
        self._stack.append([time.perf_counter(), 0.0])

    def pop(self, name: str) -> None:
        """End the innermost part, charging `name` its time less its children's."""
        start, children = self._stack.pop()
        spent = time.perf_counter() - start
        self.seconds[name] += spent - children
        self.calls[name] += 1
        if self._stack:
            self._stack[-1][1] += spent

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        self.push()
        try:
            yield
        finally:
            self.pop(name)

    def wrap(self, name: str, fn: Callable) -> Callable:
        def timed(*a, **k):
            with self.part(name):
                return fn(*a, **k)
        return timed


@contextlib.contextmanager
def instrumented(model: torch.nn.Module, prof: Profile) -> Iterator[None]:
    """Patch the loop's parts with timers for the duration of the block."""
    from transformers import AttentionInterface

    from calibrl.probe import sampler as sampler_mod
    from calibrl.probe import shared_prefix
    from calibrl.rollout import hf_engine, stopping
    try:
        from calibrl.rollout import fast_forward
    except ImportError:  # an older calibrl
        fast_forward = None

    patches: list[tuple[Any, str, Any]] = []
    items: list[tuple[dict, str, Any]] = []

    def patch_item(table: dict, key: str, new: Any) -> None:
        items.append((table, key, table[key]))
        table[key] = new

    def patch(obj: Any, name: str, new: Any) -> None:
        if not hasattr(obj, name):  # an older calibrl (the "before" measurement)
            return
        patches.append((obj, name, getattr(obj, name)))
        setattr(obj, name, new)

    loop = prof.wrap("decode loop (Python bookkeeping)", decode_mod.decode_rows)
    for mod in (hf_engine, sampler_mod):
        patch(mod, "decode_rows", loop)
    for name in ("sample_tokens", "uniforms", "uniforms_at", "uniform_table"):
        if hasattr(decode_mod, name):
            patch(decode_mod, name, prof.wrap("sampling", getattr(decode_mod, name)))
    for name in ("finish", "stop_string_in", "may_complete", "stopped"):
        if hasattr(stopping.StopChecker, name):  # an older calibrl has fewer
            patch(stopping.StopChecker, name,
                  prof.wrap("stop checks", getattr(stopping.StopChecker, name)))
    for cls in (hf_engine._PaddedRows, getattr(hf_engine, "_StaticRows", None),
                sampler_mod._SharedPrefixRows):
        if cls is None:
            continue
        patch(cls, "forward", prof.wrap("model forward (norms, rotary, glue)", cls.forward))
        for name in ("select", "keep"):  # "select" in an older calibrl
            if hasattr(cls, name):
                patch(cls, name, prof.wrap("row selection (finished rows leave)",
                                           getattr(cls, name)))

    for mod, name in ((hf_engine, "sdpa_attention_forward"), (sampler_mod, "attention")):
        if hasattr(mod, name):
            patch(mod, name, prof.wrap("attention", getattr(mod, name)))
    originals = {k: AttentionInterface._global_mapping[k]
                 for k in ("sdpa", shared_prefix.ATTENTION_NAME)}
    for k, fn in originals.items():
        AttentionInterface._global_mapping[k] = prof.wrap("attention", fn)
    if hasattr(fast_forward, "sdpa_decode"):
        patch(fast_forward, "sdpa_decode", prof.wrap("attention", fast_forward.sdpa_decode))
    try:
        from calibrl.rollout import fused_forward
    except ImportError:  # an older calibrl
        fused_forward = None
    if fused_forward is not None:
        for name in ("_mm", "_addmm", "_packed"):
            if getattr(fused_forward, name, None) is not None:
                patch(fused_forward, name, prof.wrap("linear layers", getattr(fused_forward, name)))
        for key, path in list(fused_forward.DECODE_PATHS.items()):
            patch_item(fused_forward.DECODE_PATHS, key, type(path)(
                path.step, prof.wrap("attention", path.attention)))
    hooks = []
    if fast_forward is not None and fast_forward.supported(model):  # hooks would send it down the ordinary path
        patch(fast_forward, "_linear", prof.wrap("linear layers", fast_forward._linear))
    else:
        for m in model.modules():
            if isinstance(m, torch.nn.Linear):
                hooks.append(m.register_forward_pre_hook(
                    lambda *_: prof.push()))
                hooks.append(m.register_forward_hook(lambda *_: prof.pop("linear layers")))
    try:
        yield
    finally:
        for h in hooks:
            h.remove()
        AttentionInterface._global_mapping.update(originals)
        for obj, name, old in reversed(patches):
            setattr(obj, name, old)
        for table, key, old in reversed(items):
            table[key] = old


# --- the workloads ------------------------------------------------------------------------------

class Counted:
    """Counts decoding steps, rows per step and time inside `decode_rows`."""

    def __init__(self) -> None:
        self.steps = self.rows = 0
        self.seconds = self.cpu_seconds = 0.0
        self.samples: list[list[int]] = []  # every generation's tokens, in call order

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        from calibrl.probe import sampler as sampler_mod
        from calibrl.rollout import hf_engine

        inner = decode_mod.decode_rows

        def counted(state, logits, *a, **k):
            forward = state.forward

            def fwd(tokens, pos):
                self.steps += 1
                self.rows += len(tokens)
                return forward(tokens, pos)
            state.forward = fwd
            t0, c0 = time.perf_counter(), time.process_time()
            out = inner(state, logits, *a, **k)
            self.seconds += time.perf_counter() - t0
            self.cpu_seconds += time.process_time() - c0
            # the first token of each row is sampled from the prefill's logits
            self.steps += 1
            self.rows += len(logits)
            self.samples += [g.token_ids for g in out]
            return out
        saved = (hf_engine.decode_rows, sampler_mod.decode_rows)
        hf_engine.decode_rows = sampler_mod.decode_rows = counted
        try:
            yield
        finally:
            hf_engine.decode_rows, sampler_mod.decode_rows = saved


def workloads(model, tokenizer, examples, args, pkg: str = "calibrl"
              ) -> dict[str, Callable[[], list]]:
    """The three workloads, run by the calibrl package named `pkg` (`ab_decode.py` passes an
    earlier commit's, extracted under another name)."""
    def mod(name: str) -> Any:
        return importlib.import_module(f"{pkg}.{name}")
    HFEngine = mod("rollout.hf_engine").HFEngine
    SamplingParams = mod("rollout.engine").SamplingParams
    CachedSampler = mod("probe.sampler").CachedSampler
    probe_traces = mod("probe.runner").probe_traces
    config = mod("settings.probe").ProbeSection(
        samples=args.samples, max_answer_tokens=args.probe_tokens,
        traces_per_batch=args.traces_per_batch, max_rows=args.max_rows, seed=0)
    # The decoding path, named only when not the default (an older calibrl has no option).
    decoding = {"decode": args.decode} if getattr(args, "decode", "exact") != "exact" else {}
    engine = HFEngine(model, tokenizer)  # the traces, always exact: the same for both paths
    traces = mod("probe.traces").generate_traces(engine, tokenizer,
                                                 list(enumerate(examples[:args.traces])), config)
    suffix = tokenizer(config.forced_text, add_special_tokens=False)["input_ids"]
    encode_messages = mod("rollout.rollouts").encode_messages
    prompts = [encode_messages(tokenizer, ex.messages, config.chat_template) for ex in examples]
    stop = ("</answer>",)

    def probe() -> list:
        sampler = CachedSampler(HFEngine(model, tokenizer, **decoding), max_rows=args.max_rows)
        rows = []
        for start in range(0, len(traces), config.traces_per_batch):
            rows += probe_traces(traces[start:start + config.traces_per_batch], sampler,
                                 tokenizer, config, suffix)
        return rows

    def eval_() -> list:
        out = HFEngine(model, tokenizer, max_batch_size=64, **decoding).generate(
            prompts, SamplingParams(n=2, temperature=1.0, max_new_tokens=64, stop=stop, seed=1))
        return out

    def rollout() -> list:
        out = HFEngine(model, tokenizer, max_batch_size=64, **decoding).generate(
            prompts[:8], SamplingParams(n=4, temperature=1.0, max_new_tokens=48, stop=stop,
                                        seed=2))
        return out

    chosen = {"probe": probe, "eval": eval_, "rollout": rollout}
    return {k: chosen[k] for k in args.workloads}


def digest(samples: list) -> str:
    return hashlib.sha256(json.dumps(samples).encode()).hexdigest()[:16]


def measure(name: str, fn: Callable[[], list], model, args) -> dict:
    """Median over repeats; each repeat's limit is measured right after it, at its batch shape."""
    fn()  # warm-up (allocator, first-call costs)
    fpt = flops_per_token(model)
    runs = []
    for _ in range(args.repeats):
        counter = Counted()
        with counter.active():
            t0 = time.perf_counter()
            fn()
            wall = time.perf_counter() - t0
        generated = sum(len(t) for t in counter.samples)
        rows = counter.rows / max(counter.steps, 1)
        rate_wall, rate_cpu, rate_best = matmul_rate(model, round(rows))
        rate_onednn = onednn_rate(model, round(rows))
        runs.append({
            "decode_s": counter.seconds, "decode_cpu_s": counter.cpu_seconds, "wall_s": wall,
            "generated_tokens": generated, "steps": counter.steps, "rows_per_step": rows,
            "tok_per_s": generated / counter.seconds,
            "tok_per_cpu_s": generated / counter.cpu_seconds,
            "matmul_gflop_per_s": rate_wall / 1e9, "matmul_gflop_per_cpu_s": rate_cpu / 1e9,
            "ratio": generated / counter.seconds / (rate_wall / fpt),
            "matmul_gflop_per_s_best_pass": rate_best / 1e9,  # on a quiet machine
            "ratio_cpu": generated / counter.cpu_seconds / (rate_cpu / fpt),
            # the same against oneDNN's packed products (see `onednn_rate`)
            "matmul_gflop_per_cpu_s_onednn": rate_onednn and rate_onednn / 1e9,
            "ratio_cpu_onednn": rate_onednn and generated / counter.cpu_seconds / (
                rate_onednn / fpt),
            "samples_sha256_16": digest(counter.samples), "loadavg": os.getloadavg(),
        })
    med = sorted(runs, key=lambda r: r["ratio_cpu"])[len(runs) // 2]
    prof = Profile()
    with instrumented(model, prof):
        t0 = time.perf_counter()
        fn()
        prof_wall = time.perf_counter() - t0
    profile = {k: round(v, 4) for k, v in sorted(prof.seconds.items(), key=lambda kv: -kv[1])}
    return {
        **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in med.items()},
        "limit_tok_per_s": round(med["matmul_gflop_per_s"] * 1e9 / fpt, 1),
        "flops_per_token": fpt,
        "ratio_runs": [round(r["ratio"], 3) for r in runs],
        "ratio_cpu_runs": [round(r["ratio_cpu"], 3) for r in runs],
        "ratio_cpu_onednn_runs": [r["ratio_cpu_onednn"] and round(r["ratio_cpu_onednn"], 3)
                                  for r in runs],
        "same_samples_every_run": len({r["samples_sha256_16"] for r in runs}) == 1,
        "ideal_matmul_s": round(med["generated_tokens"] * fpt / (med["matmul_gflop_per_s"] * 1e9),
                                4),
        "profile_wall_s": round(prof_wall, 4), "profile_s": profile,
    }


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder (default: the demo's warm-up model)")
    parser.add_argument("--data", help="test split (default: the demo's)")
    parser.add_argument("--tiny", action="store_true",
                        help="a random model of the demo's shape on generated problems")
    parser.add_argument("--workloads", nargs="+", default=["probe", "eval", "rollout"],
                        choices=["probe", "eval", "rollout"])
    parser.add_argument("--prompts", type=int, default=64, help="eval prompts (x 2 samples)")
    parser.add_argument("--traces", type=int, default=16, help="probe traces")
    parser.add_argument("--samples", type=int, default=50, help="probe samples per point")
    parser.add_argument("--probe-tokens", type=int, default=32)
    parser.add_argument("--traces-per-batch", type=int, default=8)
    parser.add_argument("--max-rows", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--decode", default="exact", choices=["exact", "fused"],
                        help="the decoding step (HFEngine's `decode`)")
    parser.add_argument("--out", help="results file (default: benchmarks/results/decode.json, "
                        "decode_fused.json with --decode fused)")
    return parser


def main() -> None:
    args = make_parser().parse_args()
    if args.out is None:
        suffix = "" if args.decode == "exact" else f"_{args.decode}"
        args.out = str(ROOT / f"benchmarks/results/decode{suffix}.json")
    torch.set_num_threads(args.threads)
    model, tokenizer, examples, source = load(args)
    results = {}
    for name, fn in workloads(model, tokenizer, examples, args).items():
        results[name] = r = measure(name, fn, model, args)
        print(f"{name}: {r['generated_tokens']} tokens in {r['decode_s']:.3f} s of decoding "
              f"({r['steps']} steps, {r['rows_per_step']:.1f} rows/step): "
              f"{r['tok_per_s']:,.0f} tok/s; limit {r['limit_tok_per_s']:,.0f} tok/s "
              f"({r['flops_per_token'] / 1e6:.2f} MFLOP/token at "
              f"{r['matmul_gflop_per_s']:.1f} GFLOP/s) -> ratio {r['ratio']:.3f} "
              f"(runs {r['ratio_runs']}); per CPU second: {r['tok_per_cpu_s']:,.0f} tok/s at "
              f"{r['matmul_gflop_per_cpu_s']:.1f} GFLOP/s -> ratio {r['ratio_cpu']:.3f} "
              f"(runs {r['ratio_cpu_runs']}); against oneDNN's packed products "
              f"{r['matmul_gflop_per_cpu_s_onednn'] or float('nan'):.1f} GFLOP/s -> ratio "
              f"{r['ratio_cpu_onednn'] or float('nan'):.3f}; "
              f"samples {r['samples_sha256_16']} (same every run: {r['same_samples_every_run']}); "
              f"load {tuple(round(x, 2) for x in r['loadavg'])}")
        total = sum(r["profile_s"].values())
        print(f"  profile (instrumented run, {r['profile_wall_s']:.3f} s wall; ideal matmul "
              f"{r['ideal_matmul_s']:.3f} s):")
        for part, s in r["profile_s"].items():
            print(f"    {part:40s} {s:7.3f} s  {s / total:6.1%}")
    out = {"setup": {**source, "threads": args.threads, "repeats": args.repeats,
                     "cpu": platform.processor() or platform.machine(),
                     "cpu_count": os.cpu_count(), "platform": platform.platform(),
                     "torch": torch.__version__, "transformers": transformers.__version__,
                     "args": vars(args)},
           "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
