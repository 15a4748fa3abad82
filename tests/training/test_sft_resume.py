"""`calibrl sft` runs are durable like `train`: a killed run resumes to the same weights and the
same log, a finished one is not replaced by accident, an interrupted `--overwrite` leaves the old
run whole, and a non-finite value stops the run with its good checkpoints kept."""

import json
import math

import pytest
import torch
from safetensors.torch import load_file

import calibrl.training.sft as sft_module
from calibrl.errors import UserError
from calibrl.models import create_tiny_model
from calibrl.settings.sft import SFTSettings
from calibrl.tasks.files import write_examples
from calibrl.training.checkpoint import list_checkpoints, verify_checkpoint
from calibrl.training.sft import LOG_FILE
from calibrl.training.sft_run import run_sft
from training.test_sft_train import SMALL, splits


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sft")
    data = write_examples(root / "train.parquet", splits()[0])
    return data, create_tiny_model(root / "init", **SMALL)


def _config(inputs, out, **changes) -> SFTSettings:
    data, model = inputs
    values = {"data": str(data), "out": str(out), "model": str(model), "steps": 6, "lr": 5e-3,
              "warmup_steps": 2, "batch_tokens": 512, "log_every": 1, "checkpoint_every": 2,
              "progress": False, "bf16": False, "device": "cpu"}
    return SFTSettings.create(**{**values, **changes})


def _die_at(monkeypatch, step: int, error=KeyboardInterrupt) -> None:
    real, calls = sft_module._backward, []

    def backward(*args, **kwargs):
        calls.append(1)
        if len(calls) == step:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(sft_module, "_backward", backward)


def _log(out) -> list[dict]:
    rows = [json.loads(line) for line in (out / LOG_FILE).read_text().splitlines()]
    return [{k: r[k] for k in ("step", "epoch", "loss", "lr", "grad_norm", "tokens")} for r in rows]


def test_a_killed_sft_run_resumes_to_the_same_weights_and_log(tmp_path, inputs, monkeypatch):
    run_sft(_config(inputs, tmp_path / "straight"))
    out = tmp_path / "killed"
    _die_at(monkeypatch, 6)  # step 5 is logged, the last checkpoint is step 4
    with pytest.raises(KeyboardInterrupt):
        run_sft(_config(inputs, out))
    monkeypatch.undo()
    assert [c.step for c in list_checkpoints(out)] == [2, 4] and not (out / "model").exists()
    assert [r["step"] for r in _log(out)] == [1, 2, 3, 4, 5]
    with pytest.raises(UserError, match="already holds a run"):
        run_sft(_config(inputs, out))

    result, summary = run_sft(_config(inputs, out, resume=True))
    assert result.steps == 6 and summary["problems"] == len(splits()[0])
    assert _log(out) == _log(tmp_path / "straight")  # step 5 once, with the same numbers
    expected = load_file(str(tmp_path / "straight/model/model.safetensors"))
    got = load_file(str(out / "model/model.safetensors"))
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[k], got[k]) for k in expected)


def test_resume_needs_a_run_and_overwrite_keeps_the_old_run_until_done(tmp_path, inputs,
                                                                      monkeypatch):
    out = tmp_path / "run"
    with pytest.raises(UserError, match="nothing to resume"):
        run_sft(_config(inputs, out, resume=True))
    run_sft(_config(inputs, out, steps=2))
    old_log = (out / LOG_FILE).read_text()
    old_model = (out / "model/model.safetensors").read_bytes()
    _die_at(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        run_sft(_config(inputs, out, steps=3, overwrite=True))
    assert (out / LOG_FILE).read_text() == old_log
    assert (out / "model/model.safetensors").read_bytes() == old_model
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no staging folder left
    monkeypatch.undo()
    run_sft(_config(inputs, out, steps=3, overwrite=True))
    assert [r["step"] for r in _log(out)] == [1, 2, 3]


def test_non_finite_values_stop_sft_and_are_refused_as_settings(tmp_path, inputs, monkeypatch):
    real = sft_module._backward
    calls = []

    def backward(*args, **kwargs):
        calls.append(1)
        loss, norm = real(*args, **kwargs)
        return (math.nan if len(calls) >= 3 else loss), norm

    monkeypatch.setattr(sft_module, "_backward", backward)
    out = tmp_path / "run"
    with pytest.raises(UserError, match=r"sft step 3: non-finite loss \(nan\).*checkpoint-000002"):
        run_sft(_config(inputs, out))
    assert [c.step for c in list_checkpoints(out)] == [2]
    assert verify_checkpoint(list_checkpoints(out)[0]) is None and not (out / "model").exists()
    for bad in ({"lr": math.inf}, {"weight_decay": math.inf}, {"minutes": math.nan}):
        with pytest.raises(UserError, match="finite"):
            _config(inputs, out, **bad)
