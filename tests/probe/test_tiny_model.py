"""The probe end to end on a tiny random transformers model: cached sampler and command line."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from calibrl.cli.probe_cmd import probe, unescape
from calibrl.errors import UserError
from calibrl.probe.runner import ROWS_FILE, iter_rows, run_probe
from calibrl.probe.sampler import CachedSampler, EngineSampler
from calibrl.rollout.hf_engine import HFEngine
from calibrl.rollout.rollouts import encode_messages
from calibrl.settings.probe import ProbeSection
from calibrl.tasks.files import write_examples

CONFIG = ProbeSection(samples=2, max_answer_tokens=3, trace_max_tokens=10, traces_per_batch=2,
                     limit=3)


def check_rows(rows, config, examples, tokenizer, engine):
    for row in rows:
        assert len(row["points"]) == 11 and row["samples"] == config.samples
        assert row["context_tokens"] >= len(encode_messages(tokenizer,
                                                            examples[row["trace"]].messages))
        for p in row["points"]:
            assert 0 <= p["correct"] <= config.samples
            assert p["confidence"] == p["correct"] / config.samples
            assert 0 <= p["unfinished"] <= config.samples
            assert p["cut"] <= row["chain_tokens"] <= config.trace_max_tokens


def test_cached_sampler_run(tmp_path, model, tokenizer, examples):
    engine = HFEngine(model, tokenizer)
    summary = run_probe(CachedSampler(engine, max_rows=1000), tokenizer, examples, CONFIG,
                        tmp_path / "a", trace_engine=engine, progress=False)
    rows = list(iter_rows(tmp_path / "a" / ROWS_FILE))
    assert [r["trace"] for r in rows] == [0, 1, 2] and summary["traces"] == 3
    check_rows(rows, CONFIG, examples, tokenizer, engine)
    # Other batching, same samples.
    run_probe(CachedSampler(engine, max_rows=20), tokenizer, examples,
              ProbeSection(**{**CONFIG.__dict__, "traces_per_batch": 3}), tmp_path / "b",
              trace_engine=engine, progress=False)
    assert list(iter_rows(tmp_path / "b" / ROWS_FILE)) == rows


def test_engine_sampler_run(tmp_path, model, tokenizer, examples):
    engine = HFEngine(model, tokenizer)
    config = ProbeSection(**{**CONFIG.__dict__, "points": "steps", "save_samples": True})
    run_probe(EngineSampler(engine), tokenizer, examples, config, tmp_path / "c",
              trace_engine=engine, progress=False)
    rows = list(iter_rows(tmp_path / "c" / ROWS_FILE))
    assert len(rows) == 3
    for row in rows:
        assert row["points"][0]["cut"] == 0 and row["points"][-1]["cut"] == row["chain_tokens"]
        assert all(len(p["texts"]) == 2 for p in row["points"])


@pytest.fixture(scope="module")
def files(tmp_path_factory, examples, tiny_model_dir):
    root = tmp_path_factory.mktemp("probe-cli")
    model = tiny_model_dir
    data = write_examples(root / "test.parquet", examples)
    return root, model, data


def run_cli(args):
    app = typer.Typer()
    app.command()(probe)
    return CliRunner().invoke(app, [str(a) for a in args])


def test_cli_probe_writes_rows_summary_and_plots(files):
    root, model, data = files
    out = root / "out"
    args = ["--model", model, "--data", data, "--out", out, "--samples", "2", "--limit", "2",
            "--trace-max-tokens", "8", "--max-answer-tokens", "3", "--no-progress"]
    result = run_cli(args)
    assert result.exit_code == 0, result.output
    assert "probed 2 traces" in result.output and "confidence:" in result.output
    for name in ("traces.jsonl", "summary.json", "config.json", "curves.png", "decided.png"):
        assert (out / name).is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["traces"] == 2 and len(summary["confidence"]["mean"]) == 11
    again = run_cli(args + ["--limit", "3"])  # resumes: one more trace
    assert again.exit_code == 0, again.output
    assert [r["trace"] for r in iter_rows(out / "traces.jsonl")] == [0, 1, 2]
    other = run_cli(args + ["--samples", "3"])
    assert isinstance(other.exception, UserError) and "--overwrite" in str(other.exception)


@pytest.mark.parametrize("extra, message", [
    (["--points", "a,b"], "--points"),
    (["--points", "0,2"], "[0, 1]"),
    (["--samples", "0"], "samples"),
    (["--temperature", "0"], "temperature 0"),
    (["--engine", "tpu"], "unknown engine"),
    (["--device", "gpu"], "unknown device"),
    (["--dtype", "int8"], "unknown dtype"),
    (["--traces", "missing.jsonl"], "missing.jsonl: no such file"),
])
def test_cli_bad_input_is_a_user_error(files, extra, message):
    root, model, data = files
    result = run_cli(["--model", model, "--data", data, "--out", root / "bad", *extra])
    assert isinstance(result.exception, UserError), result.output
    assert message in str(result.exception)


def test_unescape():
    assert unescape("</think>\\n<answer>") == "</think>\n<answer>"


def test_cli_vllm_engine_without_vllm_says_how_to_get_it(files, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "vllm", None)  # as if not installed
    root, model, data = files
    result = run_cli(["--model", model, "--data", data, "--out", root / "v", "--engine", "vllm"])
    assert isinstance(result.exception, UserError) and "calibrl[vllm]" in str(result.exception)
