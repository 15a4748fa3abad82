"""`run_probe`: traces in, one JSON row per trace out, then the summary and the figures.

The output folder:

    config.json    the settings and inputs; a resumed run must match them
    traces.jsonl   one row per trace, appended (and flushed) as soon as its batch is probed
    summary.json   `calibrl.probe.summary` over every row
    curves.png     mean confidence and "% same answer" along the chain, with 95% bands
    decided.png    where the final answers are decided

A row: `trace` (key), `index`, `data_source`, `ground_truth`, `final_answer`, `final_correct`
(that answer judged by the task's verifier; the summary's `solved_traces`), `stated_confidence`,
`context_tokens`, `chain_tokens`, `chain_text`, `completion` (generated traces), `samples`,
`decided_at`, and `points`: per truncation point `x`, `cut` (chain tokens kept), `correct` and
`same` (counts of samples; `same` is null when the trace has no final answer),
`confidence = correct / samples`, `same_answer = same / samples`, `unfinished` (samples that
hit the token budget) and, with `save_samples`, `texts`.

Traces are processed in key order, so resuming only needs the last key written: a run that was
stopped continues after it. A row is written with one `write` and flushed; a row cut short by a
crash is the last line, without its newline, and is dropped on resume.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from calibrl.data import TaskExample
from calibrl.errors import UserError
from calibrl.probe.judge import judge, normalise_answer, sampled_answer
from calibrl.probe.plots import plot_curves, plot_decided
from calibrl.probe.points import Point, fraction_points, step_points, token_texts
from calibrl.probe.sampler import ProbeJob, Sampler
from calibrl.probe.summary import decided_at, on_grid, summarise
from calibrl.probe.traces import (
    Trace,
    chain_text,
    check_given_traces,
    count_given_traces,
    generate_traces,
    read_given_traces,
)
from calibrl.rollout.engine import Engine, Generation, SamplingParams
from calibrl.settings.probe import ANSWER_STOP, ProbeSection
from calibrl.tasks import get_task
from calibrl.utils.atomic import atomic_write_text

CONFIG_FILE = "config.json"
ROWS_FILE = "traces.jsonl"
SUMMARY_FILE = "summary.json"
CURVES_PLOT = "curves.png"
DECIDED_PLOT = "decided.png"


def trace_points(trace: Trace, config: ProbeSection, tokenizer: Any) -> list[Point]:
    if config.by_steps:
        return step_points(token_texts(tokenizer, trace.chain_ids))
    return fraction_points(len(trace.chain_ids), config.points)  # type: ignore[arg-type]


def sampling_params(config: ProbeSection) -> SamplingParams:
    return SamplingParams(n=config.samples, temperature=config.temperature, top_p=config.top_p,
                          top_k=config.top_k, max_new_tokens=config.max_answer_tokens,
                          stop=(ANSWER_STOP,), seed=config.seed)


def build_row(trace: Trace, points: Sequence[Point], by_cut: Mapping[int, list[Generation]],
              config: ProbeSection, tokenizer: Any) -> dict[str, Any]:
    """The output row of one probed trace (format in the module docstring)."""
    final = normalise_answer(trace.final_answer)
    counts: dict[int, dict[str, Any]] = {}
    for cut, gens in by_cut.items():
        texts = [g.text for g in gens]
        counts[cut] = {
            "correct": sum(judge(t, trace.ground_truth, trace.data_source) for t in texts),
            "same": None if final is None else sum(sampled_answer(t, trace.data_source) == final
                                                  for t in texts),
            "unfinished": sum(g.finish_reason == "length" for g in gens),
            **({"texts": texts} if config.save_samples else {}),
        }
    n = config.samples
    rows = []
    for p in points:
        c = counts[p.cut]
        rows.append({"x": p.x, "cut": p.cut, "correct": c["correct"], "same": c["same"],
                     "confidence": c["correct"] / n,
                     "same_answer": None if c["same"] is None else c["same"] / n,
                     "unfinished": c["unfinished"],
                     **({"texts": c["texts"]} if "texts" in c else {})})
    decided = None
    if final is not None:
        same = on_grid([r["x"] for r in rows], [r["same_answer"] for r in rows], config.grid)
        decided = decided_at(config.grid, same, config.decided_threshold)
    return {
        "trace": trace.key, "index": trace.index, "data_source": trace.data_source,
        "ground_truth": trace.ground_truth, "final_answer": trace.final_answer,
        "final_correct": trace.final_correct, "stated_confidence": trace.stated_confidence,
        "context_tokens": len(trace.context_ids), "chain_tokens": len(trace.chain_ids),
        "chain_text": chain_text(tokenizer, trace), "completion": trace.completion,
        "samples": n, "decided_at": decided, "points": rows,
    }


def probe_traces(traces: Sequence[Trace], sampler: Sampler, tokenizer: Any,
                 config: ProbeSection, suffix: Sequence[int]) -> list[dict[str, Any]]:
    """Rows for `traces`, all their points sampled in one `sampler.sample` call."""
    points = [trace_points(t, config, tokenizer) for t in traces]
    cuts = [sorted({p.cut for p in ps}) for ps in points]
    jobs = [ProbeJob(t.key, t.context_ids + t.chain_ids, [len(t.context_ids) + c for c in cs])
            for t, cs in zip(traces, cuts, strict=True)]
    results = sampler.sample(jobs, suffix, sampling_params(config))
    return [build_row(t, ps, dict(zip(cs, res, strict=True)), config, tokenizer)
            for t, ps, cs, res in zip(traces, points, cuts, results, strict=True)]


# --- the output folder ---------------------------------------------------------------------

def prepare_out(out: Path, settings: Mapping[str, Any], overwrite: bool) -> None:
    """Make `out` hold a probe of exactly `settings`: new, resumable, or (overwrite) emptied."""
    out.mkdir(parents=True, exist_ok=True)
    saved_path = out / CONFIG_FILE
    if saved_path.is_file() and not overwrite:
        try:
            saved = json.loads(saved_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            raise UserError(f"{saved_path} is not JSON; pass --overwrite to start afresh"
                            ) from None
        if saved != json.loads(json.dumps(settings)):
            differ = sorted(_differences(saved, settings))
            raise UserError(f"{out} holds a probe with other settings ({', '.join(differ)}); "
                            "use another --out, the same settings, or --overwrite")
    elif overwrite:
        for name in (ROWS_FILE, SUMMARY_FILE, CURVES_PLOT, DECIDED_PLOT):
            (out / name).unlink(missing_ok=True)
    atomic_write_text(saved_path, json.dumps(settings, indent=2, allow_nan=False) + "\n")


def _differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key in set(a) | set(b):
        x, y = a.get(key), b.get(key)
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            yield from _differences(x, y, f"{prefix}{key}.")
        elif json.dumps(x) != json.dumps(y):
            yield f"{prefix}{key}"


def recover_rows(path: Path) -> int:
    """The last trace key in a rows file (-1 if none); drops a last row cut short by a crash."""
    if not path.is_file():
        return -1
    last, good_end = -1, 0
    with path.open("rb") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.endswith(b"\n"):
                break  # an unfinished write: only ever the last line
            try:
                last = max(last, int(json.loads(line)["trace"]))
            except (ValueError, KeyError, TypeError):
                raise UserError(f"{path} line {number} is not a probe row; pass --overwrite "
                                "to start afresh") from None
            good_end += len(line)
    if good_end < path.stat().st_size:
        with path.open("r+b") as fh:
            fh.truncate(good_end)
    return last


def iter_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a rows file, one at a time."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _append(fh: Any, row: Mapping[str, Any]) -> None:
    fh.write(json.dumps(row, allow_nan=False) + "\n")  # one write: a row is there or it is not
    fh.flush()
    os.fsync(fh.fileno())


def write_report(out: Path, config: ProbeSection) -> dict[str, Any]:
    """Summarise every row of `out` into summary.json and the figures; returns the summary."""
    summary = summarise(iter_rows(out / ROWS_FILE), config.grid, config.decided_threshold)
    atomic_write_text(out / SUMMARY_FILE, json.dumps(summary, indent=2, allow_nan=False) + "\n")
    if summary["traces"]:
        plot_curves(summary, out / CURVES_PLOT)
        plot_decided(summary, out / DECIDED_PLOT)
    return summary


# --- the run -------------------------------------------------------------------------------

def _batches(traces: Iterable[Trace], size: int) -> Iterator[list[Trace]]:
    batch: list[Trace] = []
    for trace in traces:
        batch.append(trace)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _generated(examples: Sequence[TaskExample], engine: Engine, tokenizer: Any,
               config: ProbeSection, after: int) -> Iterator[list[Trace]]:
    total = len(examples) if config.limit is None else min(config.limit, len(examples))
    keys = list(range(after + 1, total))
    for start in range(0, len(keys), config.traces_per_batch):
        chunk = keys[start:start + config.traces_per_batch]
        yield generate_traces(engine, tokenizer, [(k, examples[k]) for k in chunk], config)


def check_something_to_probe(config: ProbeSection, examples: Sequence[TaskExample],
                             traces_path: str | Path | None) -> None:
    """Refuse a probe of nothing (no trace in the file, no problem to generate one from, or
    `limit` 0) before the output folder is made: it would report "probed 0 traces" as done."""
    if config.limit == 0:
        raise UserError("limit 0 leaves no trace to probe")
    if traces_path is not None:
        check_given_traces(traces_path)
    elif not examples:
        raise UserError("no problems to generate traces for")


def run_probe(sampler: Sampler, tokenizer: Any, examples: Sequence[TaskExample],
              config: ProbeSection, out_dir: str | Path, *, traces_path: str | Path | None = None,
              trace_engine: Engine | None = None, inputs: Mapping[str, Any] | None = None,
              overwrite: bool = False, progress: bool = True) -> dict[str, Any]:
    """Probe every trace (given in `traces_path`, else generated with `trace_engine` on
    `examples`), appending rows to `out_dir`; resumes a stopped run. Returns the summary.

    `inputs` (e.g. model and data paths) join the settings a resumed run must match.
    """
    out = Path(out_dir)
    if traces_path is None and trace_engine is None:
        raise UserError("no traces: give a traces file or an engine to generate them")
    check_something_to_probe(config, examples, traces_path)
    for source in {ex.data_source for ex in examples}:
        get_task(source)  # unknown data sources fail before any work
    settings = {"probe": config.fingerprint(), "inputs": dict(inputs or {}),
                "traces": "given" if traces_path is not None else "generated"}
    prepare_out(out, settings, overwrite)
    rows_path = out / ROWS_FILE
    after = recover_rows(rows_path)
    suffix = tokenizer(config.forced_text, add_special_tokens=False)["input_ids"]

    if traces_path is not None:
        total, done = count_given_traces(traces_path, after)
        if config.limit is not None:
            total, done = min(total, config.limit), min(done, config.limit)
        batches = _batches(read_given_traces(traces_path, examples, tokenizer, config, after),
                           config.traces_per_batch)
    else:
        total = len(examples) if config.limit is None else min(config.limit, len(examples))
        done = min(after + 1, total)
        batches = _generated(examples, trace_engine, tokenizer, config, after)  # type: ignore

    with rows_path.open("a", encoding="utf-8") as fh, \
            tqdm(total=total, initial=done, desc="probe", unit="trace",
                 disable=not progress) as bar:
        for batch in batches:
            for row in probe_traces(batch, sampler, tokenizer, config, suffix):
                _append(fh, row)
                bar.update(1)
    return write_report(out, config)
