"""SFT runs end to end on a toy model: the loss falls, the model saves, reloads and generates."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from typer import Typer
from typer.testing import CliRunner

from calibrl.cli.sft_cmd import sft
from calibrl.errors import UserError
from calibrl.models import build_tiny_model, build_tokenizer, create_tiny_model
from calibrl.settings import SFTSettings
from calibrl.tasks.countdown.data import examples_from_instances
from calibrl.tasks.countdown.generate import generate_countdown
from calibrl.tasks.files import write_examples
from calibrl.training.distributed import RUN_INFO_FILE
from calibrl.training.sft import LOG_FILE, save_model_atomically, train_sft
from calibrl.training.sft_check import check_model

SMALL = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "max_position_embeddings": 512}


@functools.cache
def splits():
    train, test = generate_countdown(60, num_numbers=(3, 3), max_number=20, seed=3, test_size=10)
    return examples_from_instances(train, "train"), examples_from_instances(test, "test")


def toy_config(tmp_path, **changes) -> SFTSettings:
    values = {"data": "unused", "out": str(tmp_path), "steps": 30, "lr": 5e-3, "warmup_steps": 5,
              "batch_tokens": 1024, "log_every": 5, "progress": False, "bf16": False,
              "device": "cpu"}
    return SFTSettings.create(**{**values, **changes})


def test_loss_falls_and_the_saved_model_reloads_and_generates(tmp_path):
    tokenizer = build_tokenizer(model_max_length=512)
    model = build_tiny_model(tokenizer, seed=0, **SMALL)
    before = [p.detach().clone() for p in model.parameters()]
    result = train_sft(model, tokenizer, splits()[0], toy_config(tmp_path), tmp_path)
    rows = [json.loads(line) for line in (tmp_path / LOG_FILE).read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(5, 31, 5)) and result.steps == 30
    assert rows[-1]["loss"] < rows[0]["loss"] - 1.5
    assert result.final_loss < rows[0]["loss"] and result.trained_tokens < result.tokens
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))

    saved = save_model_atomically(model, tokenizer, tmp_path / "model")
    save_model_atomically(model, tokenizer, tmp_path / "model")  # replacing works too
    # the run's last checkpoint (every run ends with one, to resume or continue from) and how
    # it was launched
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([LOG_FILE, "model",
                                                                 "checkpoint-000030",
                                                                 RUN_INFO_FILE])
    loaded = AutoModelForCausalLM.from_pretrained(saved)
    loaded_tok = AutoTokenizer.from_pretrained(saved)
    reloaded = loaded.state_dict()
    assert set(reloaded) == set(model.state_dict())
    assert all(torch.equal(v, reloaded[k]) for k, v in model.state_dict().items())
    result = check_model(loaded, loaded_tok, splits()[1][:3], max_answer_tokens=8,
                         max_confidence_tokens=4)
    assert result.n == 3 and 0 <= result.answer_accuracy <= result.answer_format <= 1


def test_same_seed_same_weights(tmp_path):
    weights = []
    for run in range(2):
        tokenizer = build_tokenizer(model_max_length=512)
        model = build_tiny_model(tokenizer, seed=0, **SMALL)
        train_sft(model, tokenizer, splits()[0][:20], toy_config(tmp_path / str(run), steps=3),
                  tmp_path / str(run))
        weights.append(model.state_dict())
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_config_needs_a_budget_and_valid_values(tmp_path):
    with pytest.raises(UserError, match="steps and/or minutes"):
        SFTSettings.create(data="a", out="b")
    with pytest.raises(UserError, match="scheduler"):
        toy_config(tmp_path, scheduler="linear")
    with pytest.raises(UserError, match="lr"):
        toy_config(tmp_path, lr=0)


def _cli(args):
    app = Typer()
    app.command()(sft)
    return CliRunner().invoke(app, [str(a) for a in args])


def test_cli_trains_saves_and_checks(tmp_path):
    train, test = splits()
    write_examples(tmp_path / "train.parquet", train + test[:2])  # two held-out rows leak in
    write_examples(tmp_path / "test.parquet", test)
    model_dir = create_tiny_model(tmp_path / "init", **SMALL)
    out = tmp_path / "run"
    args = ["--data", tmp_path / "train.parquet", "--exclude", tmp_path / "test.parquet",
            "--out", out, "--model", model_dir, "--steps", 2, "--no-bf16", "--check", 2,
            "--mix", "answer=1"]
    result = _cli(args)
    assert result.exit_code == 0, result.output
    assert "2 held-out ones excluded" in result.output and "turn 1: format" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problems"] == len(train) and summary["excluded_held_out"] == 2
    assert json.loads((out / "sft_config.json").read_text())["mix"]["answer"] == 1.0
    assert AutoModelForCausalLM.from_pretrained(out / "model").config.hidden_size == 32

    again = _cli(args)  # OUT/model exists
    assert isinstance(again.exception, UserError) and "overwrite" in str(again.exception)
    missing = _cli(["--data", tmp_path / "nope.parquet", "--out", out, "--steps", 1])
    assert isinstance(missing.exception, UserError) and "nope.parquet" in str(missing.exception)
    no_budget = _cli(["--data", tmp_path / "train.parquet", "--out", out])
    assert isinstance(no_budget.exception, UserError)


def test_precision_other_than_the_process_accelerator_is_a_user_error():
    """accelerate's state is per process: SFT reports a clash with an earlier Accelerator.

    Run in a fresh interpreter, since the clash would otherwise stay for the whole session."""
    code = (
        "from accelerate import Accelerator\n"
        "from calibrl.errors import UserError\n"
        "from calibrl.training.sft import make_accelerator\n"
        "from calibrl.settings import SFTSettings\n"
        "Accelerator(mixed_precision='no', cpu=True)\n"
        "config = SFTSettings(data='d', out='o', steps=1, device='cpu', bf16=True)\n"
        "try:\n"
        "    make_accelerator(config)\n"
        "except UserError as err:\n"
        "    print('UserError:', err)\n"
        "print(make_accelerator(config.model_copy(update={'bf16': False})).mixed_precision)\n"
    )
    src = Path(__file__).resolve().parents[2] / "src"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(src)}, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("UserError: sft: AcceleratorState has already been initialized")
    assert out.stdout.splitlines()[-1] == "no"


def test_train_layers_moves_only_the_top_blocks(tmp_path):
    tokenizer = build_tokenizer(model_max_length=512)
    model = build_tiny_model(tokenizer, seed=0, **SMALL)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    top = model.config.num_hidden_layers - 1
    train_sft(model, tokenizer, splits()[0][:20], toy_config(tmp_path, steps=3, train_layers=1),
              tmp_path)
    for key, value in model.state_dict().items():
        trained = f"layers.{top}." in key or key == "model.norm.weight"
        assert torch.equal(value, before[key]) != trained, key
