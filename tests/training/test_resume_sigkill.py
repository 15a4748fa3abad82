"""A training process killed with SIGKILL after a checkpoint resumes to the same final weights."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from calibrl.data import TaskExample
from calibrl.models import create_tiny_model
from calibrl.tasks.files import write_examples
from calibrl.training.checkpoint import list_checkpoints
from training.held_step import held_env

TESTS = Path(__file__).resolve().parents[1]  # on sys.path (pytest's pythonpath) and PYTHONPATH

pytestmark = pytest.mark.slow


def _train_args(model, data, out, name):
    return [sys.executable, "-m", "calibrl", "train", f"model.path={model}",
            f"data.train_path={data}", "data.task_modules=[training.coin_task]",
            f"logging.output_dir={out}", f"logging.run_name={name}",
            "logging.tensorboard=false", "optim.total_steps=6", "checkpoint.every=2",
            "optim.lr=1e-2", "optim.scheduler=constant", "rollout.prompts_per_step=2",
            "rollout.num_generations_answer=2", "rollout.num_generations_confidence=2",
            "rollout.max_answer_tokens=16", "rollout.max_confidence_tokens=8"]


def test_sigkill_then_resume_matches_uninterrupted(tmp_path: Path):
    model = create_tiny_model(tmp_path / "model", hidden_size=32, num_layers=1, num_heads=2)
    from training.coin_task import COIN

    gts = [{"target": t, "numbers": [1, 2, t]} for t in range(3, 13)]
    train = write_examples(tmp_path / "train.parquet", [
        TaskExample(COIN.name, COIN.make_prompt(gt), gt, i, "train") for i, gt in enumerate(gts)])
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    subprocess.run(_train_args(model, train, tmp_path, "straight"), check=True, env=env)

    run_dir = tmp_path / "killed"
    # Held after step 3, never released (`training.held_step`): killed with checkpoint 2
    # written, however fast the run.
    proc = subprocess.Popen(_train_args(model, train, tmp_path, "killed"),
                            env=held_env(env, 3, tmp_path / "never"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not any(c.step >= 2 for c in list_checkpoints(run_dir)):
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (run_dir / "final-model").exists()

    subprocess.run([*_train_args(model, train, tmp_path, "killed"), "--resume"], check=True,
                   env=env)
    expected = load_file(str(tmp_path / "straight/final-model/model.safetensors"))
    got = load_file(str(run_dir / "final-model/model.safetensors"))
    assert expected.keys() == got.keys()
    for key in expected:
        assert torch.equal(expected[key], got[key]), key
    initial = load_file(str(model / "model.safetensors"))
    assert any(not torch.equal(initial[k], expected[k]) for k in initial)
