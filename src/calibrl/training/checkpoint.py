"""Atomic checkpoints with keep-last-K and exact resume.

A checkpoint is a directory `checkpoint-{step:06d}` holding the model (Hugging Face format), the
optimiser and scheduler states, every RNG state, the data position and the step. It is written
under a temporary name and renamed into place, so a run killed at any moment leaves either a
complete checkpoint or none; a leftover temporary directory is ignored and cleaned on the next save.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from calibrl.errors import UserError
from calibrl.utils.atomic import atomic_dir

_NAME = re.compile(r"^checkpoint-(\d{6})$")
STATE_FILE = "trainer_state.pt"
INFO_FILE = "checkpoint.json"


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


@dataclass
class Checkpoint:
    """A complete checkpoint on disk."""

    path: Path
    step: int

    @property
    def model_dir(self) -> Path:
        return self.path / "model"

    def load_state(self) -> dict[str, Any]:
        return torch.load(self.path / STATE_FILE, map_location="cpu", weights_only=False)


def list_checkpoints(run_dir: Path) -> list[Checkpoint]:
    """Complete checkpoints in `run_dir`, oldest first."""
    found = []
    if run_dir.is_dir():
        for child in run_dir.iterdir():
            match = _NAME.match(child.name)
            if match and (child / INFO_FILE).is_file():
                found.append(Checkpoint(child, int(match.group(1))))
    return sorted(found, key=lambda c: c.step)


def find_checkpoint(resume: str, run_dir: Path) -> Checkpoint | None:
    """`resume='auto'` -> latest in run_dir (None if there is none); else that path."""
    if resume == "auto":
        found = list_checkpoints(run_dir)
        return found[-1] if found else None
    path = Path(resume)
    match = _NAME.match(path.name)
    if not (match and (path / INFO_FILE).is_file()):
        raise UserError(f"not a complete calibrl checkpoint: {path}")
    return Checkpoint(path, int(match.group(1)))


def save_checkpoint(run_dir: Path, step: int, *, model: Any, tokenizer: Any,
                    trainer_state: dict[str, Any], keep_last: int) -> Checkpoint:
    """Write checkpoint `step` atomically, then delete all but the newest `keep_last`.

    `model` is an unwrapped `PreTrainedModel`; `trainer_state` holds optimiser/scheduler state
    dicts, data position and anything else needed to resume (RNG states are added here).
    """
    final = run_dir / f"checkpoint-{step:06d}"
    for stale in run_dir.glob(".tmp-checkpoint-*"):  # left by a run killed mid-save
        shutil.rmtree(stale, ignore_errors=True)
    with atomic_dir(final) as tmp:
        model.save_pretrained(tmp / "model")
        tokenizer.save_pretrained(tmp / "model")
        torch.save({**trainer_state, "rng": rng_state(), "step": step}, tmp / STATE_FILE)
        (tmp / INFO_FILE).write_text(json.dumps({"step": step}) + "\n")
        _fsync_dir(tmp)
    _fsync_dir(run_dir)
    for old in list_checkpoints(run_dir)[:-keep_last]:
        shutil.rmtree(old.path, ignore_errors=True)
    return Checkpoint(final, step)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
