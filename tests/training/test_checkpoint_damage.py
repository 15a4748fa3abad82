"""Whatever file of the newest checkpoint is cut short or lost, resuming skips that checkpoint
for the previous intact one and says so in one line; the damaged one is set aside, not resumed
and not pruned. Every file a checkpoint holds is tried, a multi-process run's `accelerate/`
folder included."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from calibrl.training.checkpoint import (
    INFO_FILE,
    find_checkpoint,
    list_checkpoints,
    save_checkpoint,
)


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory, tiny_model_dir) -> Path:
    """A run folder with checkpoints 1 and 2, each with an `accelerate/` folder."""
    run = tmp_path_factory.mktemp("damage") / "run"
    run.mkdir()
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    for step in (1, 2):
        state = run / f".tmp-accelerate-{step:06d}.{os.getpid()}"  # as a live run names it
        (state / "random_states_0").mkdir(parents=True)
        (state / "random_states_0" / "rng.pkl").write_bytes(b"rng state " * 10)
        save_checkpoint(run, step, model=model, tokenizer=tokenizer, keep_last=5,
                        trainer_state={"data": {"position": step}}, state_dir=state)
    return run


def _files(checkpoint: Path) -> list[str]:
    return sorted(p.relative_to(checkpoint).as_posix() for p in checkpoint.rglob("*")
                  if p.is_file())


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_every_file_of_a_checkpoint_is_covered(two_checkpoints):
    names = _files(two_checkpoints / "checkpoint-000002")
    assert {"model/model.safetensors", "trainer_state.pt", INFO_FILE,
            "accelerate/random_states_0/rng.pkl"} <= set(names)
    assert len(names) >= 6  # and the model config and tokenizer files


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_a_damaged_latest_checkpoint_is_skipped_for_the_previous_one(two_checkpoints, tmp_path,
                                                                     capsys, damage):
    for index, name in enumerate(_files(two_checkpoints / "checkpoint-000002")):
        run = tmp_path / str(index)
        shutil.copytree(two_checkpoints, run)
        target = run / "checkpoint-000002" / name
        _truncate(target) if damage == "truncated" else target.unlink()
        capsys.readouterr()
        found = find_checkpoint("auto", run)
        lines = capsys.readouterr().out.strip().splitlines()
        assert found is not None and found.step == 1, name
        assert len(lines) == 1 and "checkpoint-000002 as checkpoint-000002.corrupt" in lines[0]
        expected = (f"unreadable {INFO_FILE}" if name == INFO_FILE and damage == "truncated"
                    else f"{name} is {'changed' if damage == 'truncated' else 'missing'}")
        assert expected in lines[0], (name, lines[0])
        assert (run / "checkpoint-000002.corrupt" / name).exists() == (damage == "truncated")
        assert [c.step for c in list_checkpoints(run)] == [1]


def test_nothing_intact_is_nothing_to_resume(two_checkpoints, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(two_checkpoints, run)
    for step in (1, 2):
        _truncate(run / f"checkpoint-00000{step}" / "trainer_state.pt")
    assert find_checkpoint("auto", run) is None
    assert capsys.readouterr().out.count("warning: set aside") == 2
