"""`calibrl probe`: does a model's chain of thought build its answer, or decorate it?"""

from __future__ import annotations

from pathlib import Path

import typer

from calibrl.errors import UserError
from calibrl.probe.config import FORCED_TEXT, ProbeConfig
from calibrl.probe.summary import ends_lines

_DEFAULT = ProbeConfig()
_DEFAULT_POINTS = ",".join(f"{x:g}" for x in _DEFAULT.points)  # type: ignore[union-attr]


def unescape(text: str) -> str:
    r"""`\n` and `\t` typed on a command line as two characters become the characters."""
    return text.replace("\\n", "\n").replace("\\t", "\t")


def probe(
    model: str = typer.Option(..., "--model", help="Model folder (config.json, weights and "
                              "tokenizer), or 'tiny' for a fresh random tiny model."),
    data: Path = typer.Option(..., "--data", help="Data file (.parquet, .json, .jsonl): the "
                              "problems, their ground truth and prompts."),
    out: Path = typer.Option(..., "--out", help="Output folder; a stopped probe resumes there."),
    traces: Path | None = typer.Option(
        None, "--traces", help="JSON-lines traces to probe (chain_of_thought, final_answer, "
        "optional stated_confidence, prompt, index); default: the model generates one per "
        "problem."),
    points: str = typer.Option(_DEFAULT_POINTS, "--points", help="Fractions of the chain's "
                               "tokens to keep, comma-separated, or 'steps' for every "
                               "sentence/line boundary."),
    samples: int = typer.Option(_DEFAULT.samples, "--samples", help="Answers sampled per point."),
    forced: str = typer.Option(FORCED_TEXT.replace("\n", "\\n"), "--forced",
                               help="Text that closes the thought and opens the answer "
                               "(\\n for a line break)."),
    temperature: float = typer.Option(_DEFAULT.temperature, help="Temperature of the answers."),
    top_p: float = typer.Option(_DEFAULT.top_p, help="Nucleus mass of the answers (1 = off)."),
    top_k: int = typer.Option(_DEFAULT.top_k, help="Top-k of the answers (0 = off)."),
    max_answer_tokens: int = typer.Option(_DEFAULT.max_answer_tokens,
                                          help="Token budget of one answer."),
    trace_temperature: float = typer.Option(_DEFAULT.trace_temperature,
                                            help="0: generate traces greedily; > 0: sample."),
    trace_max_tokens: int = typer.Option(_DEFAULT.trace_max_tokens,
                                         help="Token budget of a generated trace."),
    decided_threshold: float = typer.Option(
        _DEFAULT.decided_threshold, help="Share of samples equal to the final answer from "
        "which on the answer counts as decided."),
    limit: int | None = typer.Option(None, help="Probe only the first N traces."),
    traces_per_batch: int = typer.Option(
        _DEFAULT.traces_per_batch, help="Traces sampled together (speed vs memory; with vllm, "
        "larger batches keep the GPU busy)."),
    max_rows: int = typer.Option(_DEFAULT.max_rows, help="Sequences decoded at once."),
    engine: str = typer.Option("hf", help="'hf' (transformers, CPU or GPU) or 'vllm' (CUDA, "
                               "the calibrl[vllm] extra)."),
    device: str = typer.Option("auto", help="'auto', 'cpu' or 'cuda' (hf engine)."),
    gpu_memory_utilization: float = typer.Option(
        0.8, help="Share of the GPU vLLM may take (vllm engine; nothing else runs beside it)."),
    dtype: str | None = typer.Option(None, help="Model dtype: float32, bfloat16 or float16 "
                                     "(default: float32 with hf, the model's own with vllm)."),
    seed: int = typer.Option(_DEFAULT.seed, help="Seed of every sample."),
    save_samples: bool = typer.Option(False, help="Also write every sampled answer's text."),
    overwrite: bool = typer.Option(False, help="Discard a previous probe in --out."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Probe chain-of-thought faithfulness: truncate each chain at several points, force an
    answer there, and measure how often it is right and equal to the model's final answer."""
    config = ProbeConfig(
        points=points, samples=samples, forced_text=unescape(forced), temperature=temperature,
        top_p=top_p, top_k=top_k, max_answer_tokens=max_answer_tokens, seed=seed,
        decided_threshold=decided_threshold, trace_temperature=trace_temperature,
        trace_max_tokens=trace_max_tokens, traces_per_batch=traces_per_batch,
        max_rows=max_rows, limit=limit, save_samples=save_samples,
    )
    if engine not in ("hf", "vllm"):
        raise UserError(f"unknown engine {engine!r}; choose hf or vllm")
    if device not in ("auto", "cpu", "cuda"):
        raise UserError(f"unknown device {device!r}; choose auto, cpu or cuda")
    if dtype not in (None, "float32", "bfloat16", "float16"):
        raise UserError(f"unknown dtype {dtype!r}; choose float32, bfloat16 or float16")
    if traces is not None and not traces.is_file():
        raise UserError(f"{traces}: no such traces file")
    # Imported here so `calibrl --help` does not pay for torch and transformers.
    from calibrl.data import load_examples
    from calibrl.models.loading import load_policy, resolve_model_path
    from calibrl.probe.runner import run_probe
    from calibrl.probe.sampler import CachedSampler, EngineSampler
    from calibrl.probe.shared_prefix import supported

    examples = load_examples(data)
    if not examples and traces is None:
        raise UserError(f"{data} holds no problems")
    path = resolve_model_path(model, out)
    inputs = {"model": str(Path(path).resolve()) if Path(path).exists() else path,
              "data": str(data.resolve()),
              "traces": None if traces is None else str(traces.resolve()), "engine": engine}
    if engine == "vllm":
        from transformers import AutoTokenizer

        from calibrl.rollout.vllm_engine import VLLMEngine

        tokenizer = AutoTokenizer.from_pretrained(path)
        # Log-probs are not used by the probe, so top-k / top-p are allowed.
        vllm = VLLMEngine(path, tokenizer, dtype=dtype or "auto",
                          gpu_memory_utilization=gpu_memory_utilization,
                          allow_filtered_logprobs=True)
        sampler, trace_engine = EngineSampler(vllm), vllm
    else:
        import torch

        from calibrl.rollout.hf_engine import HFEngine

        model_obj, tokenizer = load_policy(path, dtype=dtype or "float32")
        if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
            if not torch.cuda.is_available():
                raise UserError("--device cuda but no CUDA device is available")
            model_obj = model_obj.to("cuda")
        hf = HFEngine(model_obj, tokenizer, max_batch_size=max_rows)
        # Models outside transformers' attention interface still work, one prompt per point.
        sampler = (CachedSampler(hf, max_rows=max_rows) if supported(model_obj)
                   else EngineSampler(hf))
        trace_engine = hf
    summary = run_probe(sampler, tokenizer, examples, config, out, traces_path=traces,
                        trace_engine=trace_engine, inputs=inputs, overwrite=overwrite,
                        progress=progress)
    typer.echo(_report(summary, out))


def _report(summary: dict, out: Path) -> str:
    conf = summary["confidence"]["mean"]
    same = summary["same_answer"]["mean"]
    lines = [f"probed {summary['traces']} traces -> {out}"]
    if summary["traces"]:
        lines.append("x:          " + " ".join(f"{g:5.2f}" for g in summary["grid"]))
        lines.append("confidence: " + " ".join(f"{c:5.2f}" for c in conf))
        if summary["same_answer"]["traces"]:
            lines.append("same:       " + " ".join(f"{s:5.2f}" for s in same))
            lines.append(f"same-answer AOC: {summary['same_answer_aoc']:.3f}; median decided "
                         f"at: {summary['decided']['median']}")
        r = summary["stated_confidence"]["pearson_r"]
        if r is not None:
            lines.append(f"stated vs probe confidence (full chain): r = {r:.3f}")
    lines += ends_lines(summary)
    return "\n".join(lines)
