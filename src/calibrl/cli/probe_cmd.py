"""`calibrl probe`: does a model's chain of thought build its answer, or decorate it?"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from calibrl.cli.options import (
    OptionMap,
    config_option,
    print_config_option,
)
from calibrl.errors import UserError, no_rows
from calibrl.probe.summary import ends_lines
from calibrl.settings.probe import FORCED_TEXT, ProbeSettings, parse_points, points_text


def unescape(text: str) -> str:
    r"""`\n` and `\t` typed on a command line as two characters become the characters."""
    return text.replace("\\n", "\n").replace("\\t", "\t")


PROBE = OptionMap(ProbeSettings, keys={"forced": "forced_text"},
                  convert={"forced": unescape, "points": parse_points}, example="samples=50")


def probe(
    ctx: typer.Context,
    overrides: list[str] = PROBE.overrides_argument(),
    config: Path = config_option(),
    print_config: bool = print_config_option(),
    model: str = PROBE.option("model", "--model"),
    data: Path = PROBE.option("data", "--data"),
    out: Path = PROBE.option("out", "--out"),
    traces: Path = PROBE.option("traces", "--traces"),
    points: str = PROBE.option("points", "--points", shown=points_text(
        ProbeSettings.model_fields["points"].default)),
    samples: int = PROBE.option("samples", "--samples"),
    forced: str = PROBE.option("forced", "--forced", shown=FORCED_TEXT.replace("\n", "\\n"),
                               more_help=" (\\n for a line break)"),
    temperature: float = PROBE.option("temperature"),
    top_p: float = PROBE.option("top_p"),
    top_k: int = PROBE.option("top_k"),
    max_answer_tokens: int = PROBE.option("max_answer_tokens"),
    trace_temperature: float = PROBE.option("trace_temperature"),
    trace_max_tokens: int = PROBE.option("trace_max_tokens"),
    decided_threshold: float = PROBE.option("decided_threshold"),
    limit: int = PROBE.option("limit"),
    traces_per_batch: int = PROBE.option("traces_per_batch"),
    max_rows: int = PROBE.option("max_rows"),
    engine: str = PROBE.option("engine"),
    device: str = PROBE.option("device"),
    gpu_memory_utilization: float = PROBE.option("gpu_memory_utilization"),
    dtype: str = PROBE.option("dtype"),
    seed: int = PROBE.option("seed"),
    save_samples: bool = PROBE.option("save_samples"),
    overwrite: bool = PROBE.option("overwrite"),
    progress: bool = PROBE.option("progress"),
) -> None:
    """Probe chain-of-thought faithfulness: truncate each chain at several points, force an
    answer there, and measure how often it is right and equal to the model's final answer."""
    settings = PROBE.load(ctx)
    traces_path = None if settings.traces is None else Path(settings.traces)
    # Imported here so `calibrl --help` does not pay for torch and transformers.
    from calibrl.models.loading import resolve_model_path
    from calibrl.probe.runner import check_something_to_probe, run_probe
    from calibrl.tasks.files import load_examples

    examples = load_examples(settings.data)
    if not examples and traces_path is None:
        raise no_rows(settings.data)
    check_something_to_probe(settings, examples, traces_path)  # before the model loads
    out_dir = Path(settings.out)
    path = resolve_model_path(settings.model, out_dir)
    inputs = {"model": str(Path(path).resolve()) if Path(path).exists() else path,
              "data": str(Path(settings.data).resolve()),
              "traces": None if traces_path is None else str(traces_path.resolve()),
              "engine": settings.engine}
    sampler, trace_engine, tokenizer = _sampler(settings, path)
    summary = run_probe(sampler, tokenizer, examples, settings, out_dir, traces_path=traces_path,
                        trace_engine=trace_engine, inputs=inputs, overwrite=settings.overwrite,
                        progress=settings.progress)
    typer.echo(_report(summary, out_dir))


def _sampler(settings: ProbeSettings, path: str) -> tuple[Any, Any, Any]:
    """(sampler, trace engine, tokenizer) on the engine the settings name."""
    if settings.engine == "vllm":
        return _vllm_sampler(path, settings.dtype, settings.gpu_memory_utilization)
    return _hf_sampler(path, settings.device, settings.dtype, settings.max_rows, settings.decode)


def _vllm_sampler(path: str, dtype: str | None, gpu_memory_utilization: float
                  ) -> tuple[Any, Any, Any]:
    """(sampler, trace engine, tokenizer) on vLLM: one prompt per point, prefix caching."""
    from transformers import AutoTokenizer

    from calibrl.probe.sampler import EngineSampler
    from calibrl.rollout.factory import make_engine

    tokenizer = AutoTokenizer.from_pretrained(path)
    # Log-probs are not used by the probe, so top-k / top-p are allowed.
    vllm = make_engine("vllm", path, tokenizer, dtype=dtype or "auto",
                       gpu_memory_utilization=gpu_memory_utilization,
                       allow_filtered_logprobs=True)
    return EngineSampler(vllm), vllm, tokenizer


def _hf_sampler(path: str, device: str, dtype: str | None, max_rows: int, decode: str = "exact"
                ) -> tuple[Any, Any, Any]:
    """(sampler, trace engine, tokenizer) on transformers, on the GPU when asked or found."""
    import torch

    from calibrl.models.loading import load_policy
    from calibrl.probe.sampler import CachedSampler, EngineSampler
    from calibrl.probe.shared_prefix import supported
    from calibrl.rollout.factory import make_engine

    model, tokenizer = load_policy(path, dtype=dtype or "float32")
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UserError("--device cuda but no CUDA device is available")
        model = model.to("cuda")
    hf = make_engine("hf", model, tokenizer, max_batch_size=max_rows, decode=decode)
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
