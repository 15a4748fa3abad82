"""`calibrl train` keeps its run directory safe: one process per directory, no silent replace
or fresh start, resume from the newest intact checkpoint without duplicated log rows, and a stop
with the last good checkpoint kept when a value turns non-finite."""

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import calibrl.training.trainer as trainer_module
import calibrl.training.update as update_module
from calibrl.cli.main import main
from calibrl.data import TaskExample
from calibrl.tasks.files import write_examples
from calibrl.training.checkpoint import list_checkpoints, verify_checkpoint
from calibrl.utils.run_dir import RunLock
from training.coin_task import COIN

# End-to-end trainings: `make test-slow` (and CI) run them.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("durable")
    model = tiny_model_dir
    gts = [{"target": t, "numbers": [1, 2, t]} for t in range(3, 11)]
    data = write_examples(root / "train.parquet", [
        TaskExample(COIN.name, COIN.make_prompt(gt), gt, i, "train") for i, gt in enumerate(gts)])
    return model, data


def _train(inputs, out: Path, *extra: str, name: str | None = "run") -> int:
    model, data = inputs
    argv = ["train", f"model.path={model}", f"data.train_path={data}",
            "data.task_modules=[training.coin_task]", f"logging.output_dir={out}",
            "logging.tensorboard=false", "logging.samples_every=1", "optim.total_steps=4",
            "checkpoint.every=1", "checkpoint.keep_last=2", "optim.lr=1e-2",
            "optim.scheduler=constant", "rollout.prompts_per_step=2",
            "rollout.num_generations_answer=2", "rollout.num_generations_confidence=2",
            "rollout.max_answer_tokens=8", "rollout.max_confidence_tokens=6",
            *([f"logging.run_name={name}"] if name else []), *extra]
    try:
        main(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


def _fails(capsys, inputs, out, *extra, name="run") -> str:
    capsys.readouterr()
    code = _train(inputs, out, *extra, name=name)
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after any progress bars
    assert code == 2 and err.startswith("error:"), err
    return err


def _steps(path: Path) -> list[int]:
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def test_a_busy_run_directory_is_refused_naming_its_owner(tmp_path, capsys, inputs):
    lock = RunLock.acquire(tmp_path / "run")
    try:
        err = _fails(capsys, inputs, tmp_path)
    finally:
        lock.release()
    assert f"in use by process {os.getpid()}" in err
    assert not (tmp_path / "run").exists()


def test_nothing_to_resume_and_non_finite_settings_are_refused(tmp_path, capsys, inputs):
    assert "nothing to resume" in _fails(capsys, inputs, tmp_path, "--resume")
    assert "without logging.run_name" in _fails(capsys, inputs, tmp_path, "--resume", name=None)
    for bad in ("optim.lr=.inf", "optim.weight_decay=.inf", "algorithm.lambda_conf=.nan"):
        assert "finite" in _fails(capsys, inputs, tmp_path, bad)
    assert not any(tmp_path.iterdir())  # refused before anything was written


def test_damaged_latest_checkpoint_falls_back_and_logs_are_cut(tmp_path, capsys, inputs):
    run = tmp_path / "run"
    assert _train(inputs, tmp_path) == 0
    expected = load_file(str(run / "final-model/model.safetensors"))
    samples_per_step = len(_steps(run / "samples.jsonl")) // 4
    assert "already holds a run" in _fails(capsys, inputs, tmp_path)

    # The newest checkpoint's state is emptied, as a full disk or a torn copy leaves it.
    (run / "checkpoint-000004/trainer_state.pt").write_bytes(b"")
    assert _train(inputs, tmp_path, "--resume") == 0
    assert (run / "checkpoint-000004.corrupt").is_dir()
    assert [c.step for c in list_checkpoints(run)] == [3, 4]
    assert all(verify_checkpoint(c) is None for c in list_checkpoints(run))
    # Step 4 was logged by both runs; the resumed one cut the first copy.
    assert _steps(run / "metrics.jsonl") == [1, 2, 3, 4]
    assert _steps(run / "samples.jsonl") == sorted([1, 2, 3, 4] * samples_per_step)
    got = load_file(str(run / "final-model/model.safetensors"))
    assert all(torch.equal(expected[k], got[k]) for k in expected)  # the same step 4 again


def test_non_finite_loss_stops_with_exit_2_and_keeps_the_good_checkpoints(
        tmp_path, capsys, inputs, monkeypatch):
    real_loss, real_step = update_module.policy_loss, trainer_module.Trainer.train_step
    poisoned = {"on": False}

    def loss(*args, **kwargs):
        value, metrics = real_loss(*args, **kwargs)
        return (value * float("nan") if poisoned["on"] else value), metrics

    def step(self):
        poisoned["on"] = self.step + 1 >= 3
        return real_step(self)

    monkeypatch.setattr(update_module, "policy_loss", loss)
    monkeypatch.setattr(trainer_module.Trainer, "train_step", step)
    err = _fails(capsys, inputs, tmp_path)
    assert "step 3: non-finite loss (nan)" in err and "checkpoint-000002" in err
    run = tmp_path / "run"
    assert [c.step for c in list_checkpoints(run)] == [1, 2]
    assert all(verify_checkpoint(c) is None for c in list_checkpoints(run))
    assert not (run / "final-model").exists()
    weights = load_file(str(run / "checkpoint-000002/model/model.safetensors"))
    assert all(torch.isfinite(v).all() for v in weights.values())


def test_overwrite_replaces_only_when_the_new_run_is_done(tmp_path, inputs, monkeypatch):
    run = tmp_path / "run"
    assert _train(inputs, tmp_path, "optim.total_steps=2") == 0
    old = (run / "final-model/model.safetensors").read_bytes()
    real_step = trainer_module.Trainer.train_step

    def dying_step(self):
        if self.step == 1:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the replacing run: exit 130
        return real_step(self)

    monkeypatch.setattr(trainer_module.Trainer, "train_step", dying_step)
    assert _train(inputs, tmp_path, "optim.total_steps=2", "seed=1", "--overwrite") == 130

    assert (run / "final-model/model.safetensors").read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    monkeypatch.setattr(trainer_module.Trainer, "train_step", real_step)
    assert _train(inputs, tmp_path, "optim.total_steps=2", "seed=1", "--overwrite") == 0
    assert (run / "final-model/model.safetensors").read_bytes() != old
    assert _steps(run / "metrics.jsonl") == [1, 2]
    shutil.rmtree(run)
