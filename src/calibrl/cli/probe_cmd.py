"""`calibrl probe`: does a model's chain of thought build its answer, or decorate it?"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from calibrl.errors import UserError
from calibrl.probe.config import FORCED_TEXT, ProbeConfig
from calibrl.probe.summary import ends_lines

_DEFAULT = ProbeConfig()
_DEFAULT_POINTS = ",".join(f"{x:g}" for x in _DEFAULT.points)  # type: ignore[union-attr]


def unescape(text: str) -> str:
    r"""`\n` and `\t` typed on a command line as two characters become the characters."""
    return text.replace("\\n", "\n").replace("\\t", "\t")


def _opt(help_text: str, *flags: str) -> typer.models.OptionInfo:
    """`typer.Option` with the help text first: most options below need nothing else."""
    return typer.Option(*flags, help=help_text)


# The options of `probe`, declared here so the command reads as what it does.
_Model = Annotated[str, _opt("Model folder (config.json, weights and tokenizer), or 'tiny' for a "
                             "fresh random tiny model.", "--model")]
_Data = Annotated[Path, _opt("Data file (.parquet, .json, .jsonl): the problems, their ground "
                             "truth and prompts.", "--data")]
_Out = Annotated[Path, _opt("Output folder; a stopped probe resumes there.", "--out")]
_Traces = Annotated[Path | None, _opt(
    "JSON-lines traces to probe (chain_of_thought, final_answer, optional stated_confidence, "
    "prompt, index); default: the model generates one per problem.", "--traces")]
_Points = Annotated[str, _opt("Fractions of the chain's tokens to keep, comma-separated, or "
                              "'steps' for every sentence/line boundary.", "--points")]
_Samples = Annotated[int, _opt("Answers sampled per point.", "--samples")]
_Forced = Annotated[str, _opt("Text that closes the thought and opens the answer (\\n for a "
                              "line break).", "--forced")]
_Temperature = Annotated[float, _opt("Temperature of the answers.")]
_TopP = Annotated[float, _opt("Nucleus mass of the answers (1 = off).")]
_TopK = Annotated[int, _opt("Top-k of the answers (0 = off).")]
_MaxAnswerTokens = Annotated[int, _opt("Token budget of one answer.")]
_TraceTemperature = Annotated[float, _opt("0: generate traces greedily; > 0: sample.")]
_TraceMaxTokens = Annotated[int, _opt("Token budget of a generated trace.")]
_DecidedThreshold = Annotated[float, _opt("Share of samples equal to the final answer from "
                                          "which on the answer counts as decided.")]
_Limit = Annotated[int | None, _opt("Probe only the first N traces.")]
_TracesPerBatch = Annotated[int, _opt("Traces sampled together (speed vs memory; with vllm, "
                                      "larger batches keep the GPU busy).")]
_MaxRows = Annotated[int, _opt("Sequences decoded at once.")]
_Engine = Annotated[str, _opt("'hf' (transformers, CPU or GPU) or 'vllm' (CUDA, the "
                              "calibrl[vllm] extra).")]
_Device = Annotated[str, _opt("'auto', 'cpu' or 'cuda' (hf engine).")]
_GpuMemory = Annotated[float, _opt("Share of the GPU vLLM may take (vllm engine; nothing else "
                                   "runs beside it).")]
_Dtype = Annotated[str | None, _opt("Model dtype: float32, bfloat16 or float16 (default: "
                                    "float32 with hf, the model's own with vllm).")]
_Seed = Annotated[int, _opt("Seed of every sample.")]
_SaveSamples = Annotated[bool, _opt("Also write every sampled answer's text.")]
_Overwrite = Annotated[bool, _opt("Discard a previous probe in --out.")]
_Progress = Annotated[bool, _opt("Show a progress bar.")]


def probe(
    model: _Model, data: _Data, out: _Out, traces: _Traces = None,
    points: _Points = _DEFAULT_POINTS, samples: _Samples = _DEFAULT.samples,
    forced: _Forced = FORCED_TEXT.replace("\n", "\\n"),
    temperature: _Temperature = _DEFAULT.temperature, top_p: _TopP = _DEFAULT.top_p,
    top_k: _TopK = _DEFAULT.top_k, max_answer_tokens: _MaxAnswerTokens = _DEFAULT.max_answer_tokens,
    trace_temperature: _TraceTemperature = _DEFAULT.trace_temperature,
    trace_max_tokens: _TraceMaxTokens = _DEFAULT.trace_max_tokens,
    decided_threshold: _DecidedThreshold = _DEFAULT.decided_threshold, limit: _Limit = None,
    traces_per_batch: _TracesPerBatch = _DEFAULT.traces_per_batch,
    max_rows: _MaxRows = _DEFAULT.max_rows, engine: _Engine = "hf", device: _Device = "auto",
    gpu_memory_utilization: _GpuMemory = 0.8, dtype: _Dtype = None,
    seed: _Seed = _DEFAULT.seed, save_samples: _SaveSamples = False,
    overwrite: _Overwrite = False, progress: _Progress = True,
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
    _check_choices(engine, device, dtype, traces)
    # Imported here so `calibrl --help` does not pay for torch and transformers.
    from calibrl.data import load_examples
    from calibrl.models.loading import resolve_model_path
    from calibrl.probe.runner import run_probe

    examples = load_examples(data)
    if not examples and traces is None:
        raise UserError(f"{data} holds no problems")
    path = resolve_model_path(model, out)
    inputs = {"model": str(Path(path).resolve()) if Path(path).exists() else path,
              "data": str(data.resolve()),
              "traces": None if traces is None else str(traces.resolve()), "engine": engine}
    if engine == "vllm":
        sampler, trace_engine, tokenizer = _vllm_sampler(path, dtype, gpu_memory_utilization)
    else:
        sampler, trace_engine, tokenizer = _hf_sampler(path, device, dtype, max_rows)
    summary = run_probe(sampler, tokenizer, examples, config, out, traces_path=traces,
                        trace_engine=trace_engine, inputs=inputs, overwrite=overwrite,
                        progress=progress)
    typer.echo(_report(summary, out))


def _check_choices(engine: str, device: str, dtype: str | None, traces: Path | None) -> None:
    if engine not in ("hf", "vllm"):
        raise UserError(f"unknown engine {engine!r}; choose hf or vllm")
    if device not in ("auto", "cpu", "cuda"):
        raise UserError(f"unknown device {device!r}; choose auto, cpu or cuda")
    if dtype not in (None, "float32", "bfloat16", "float16"):
        raise UserError(f"unknown dtype {dtype!r}; choose float32, bfloat16 or float16")
    if traces is not None and not traces.is_file():
        raise UserError(f"{traces}: no such traces file")


def _vllm_sampler(path: str, dtype: str | None, gpu_memory_utilization: float
                  ) -> tuple[Any, Any, Any]:
    """(sampler, trace engine, tokenizer) on vLLM: one prompt per point, prefix caching."""
    from transformers import AutoTokenizer

    from calibrl.probe.sampler import EngineSampler
    from calibrl.rollout.vllm_engine import VLLMEngine

    tokenizer = AutoTokenizer.from_pretrained(path)
    # Log-probs are not used by the probe, so top-k / top-p are allowed.
    vllm = VLLMEngine(path, tokenizer, dtype=dtype or "auto",
                      gpu_memory_utilization=gpu_memory_utilization,
                      allow_filtered_logprobs=True)
    return EngineSampler(vllm), vllm, tokenizer


def _hf_sampler(path: str, device: str, dtype: str | None, max_rows: int
                ) -> tuple[Any, Any, Any]:
    """(sampler, trace engine, tokenizer) on transformers, on the GPU when asked or found."""
    import torch

    from calibrl.models.loading import load_policy
    from calibrl.probe.sampler import CachedSampler, EngineSampler
    from calibrl.probe.shared_prefix import supported
    from calibrl.rollout.hf_engine import HFEngine

    model, tokenizer = load_policy(path, dtype=dtype or "float32")
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UserError("--device cuda but no CUDA device is available")
        model = model.to("cuda")
    hf = HFEngine(model, tokenizer, max_batch_size=max_rows)
    # Models outside transformers' attention interface still work, one prompt per point.
    sampler = CachedSampler(hf, max_rows=max_rows) if supported(model) else EngineSampler(hf)
    return sampler, hf, tokenizer


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
