"""Atomic, checksummed checkpoints with keep-last-K and exact resume.

A checkpoint is a directory `checkpoint-{step:06d}` holding the model (Hugging Face format), the
optimiser and scheduler states, every RNG state, the data position and the step. It is written
under a temporary name and renamed into place, so a run killed at any moment leaves either a
complete checkpoint or none; a leftover temporary directory is ignored and cleaned on the next save.
`checkpoint.json` lists the sha256 of every file: `find_checkpoint` resumes from the newest
checkpoint whose files still match (a disk that lost or changed bytes cannot pass) and sets the
newer, damaged ones aside as `checkpoint-NNNNNN.corrupt`, so pruning never prefers them; a
checkpoint folder without `checkpoint.json` (which is written last) counts as damaged too.

A run of several processes also keeps `accelerate/`, written by every process with accelerate's
`save_state` (the optimiser and model shards of FSDP / DeepSpeed, each process's RNG states);
it is resumed with `load_state`. A single-process checkpoint has no such folder.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from calibrl.errors import UserError
from calibrl.utils.atomic import atomic_dir, recover

_NAME = re.compile(r"^checkpoint-(\d{6})$")
STATE_FILE = "trainer_state.pt"
ACCELERATE_DIR = "accelerate"
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

    @property
    def accelerate_dir(self) -> Path | None:
        """The processes' `save_state` folder, if the run had several processes."""
        path = self.path / ACCELERATE_DIR
        return path if path.is_dir() else None

    def load_state(self) -> dict[str, Any]:
        return torch.load(self.path / STATE_FILE, map_location="cpu", weights_only=False)


def _checkpoint_folders(run_dir: Path) -> list[Checkpoint]:
    """Every `checkpoint-NNNNNN` folder in `run_dir`, complete or not, oldest first."""
    found = []
    if run_dir.is_dir():
        for child in run_dir.iterdir():
            match = _NAME.match(child.name)
            if match and child.is_dir():
                found.append(Checkpoint(child, int(match.group(1))))
    return sorted(found, key=lambda c: c.step)


def list_checkpoints(run_dir: Path) -> list[Checkpoint]:
    """Complete checkpoints in `run_dir` (not yet verified), oldest first."""
    return [c for c in _checkpoint_folders(run_dir) if (c.path / INFO_FILE).is_file()]


def _file_hashes(root: Path) -> dict[str, str]:
    hashes = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != INFO_FILE):
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        hashes[path.relative_to(root).as_posix()] = digest.hexdigest()
    return hashes


def verify_checkpoint(ckpt: Checkpoint) -> str | None:
    """None if every file matches the checksums written with it, else what is wrong.

    A checkpoint from before checksums (no "files" in checkpoint.json) is taken as it is.
    """
    if not (ckpt.path / INFO_FILE).is_file():
        return f"{INFO_FILE} is missing"
    try:
        info = json.loads((ckpt.path / INFO_FILE).read_text())
    except (OSError, ValueError) as err:
        return f"unreadable {INFO_FILE} ({err})"
    expected = info.get("files") if isinstance(info, dict) else None
    if expected is None:
        return None
    got = _file_hashes(ckpt.path)
    for name in sorted(set(expected) | set(got)):
        if expected.get(name) != got.get(name):
            return f"{name} is {'missing' if name not in got else 'changed'}"
    return None


def set_aside(ckpt: Checkpoint, why: str, suffix: str = "corrupt") -> None:
    """Rename a checkpoint out of the resumable ones (kept for inspection, never pruned)."""
    target = ckpt.path.with_name(f"{ckpt.path.name}.{suffix}")
    shutil.rmtree(target, ignore_errors=True)
    ckpt.path.rename(target)
    print(f"warning: set aside {ckpt.path} as {target.name}: {why}")


def find_checkpoint(resume: str, run_dir: Path, *, main: bool = True) -> Checkpoint | None:
    """`resume='auto'` -> the newest intact checkpoint in run_dir (None if there is none; the
    damaged newer ones are set aside by the main process); else that path, which must be intact."""
    if resume == "auto":
        for ckpt in reversed(_checkpoint_folders(run_dir)):
            problem = verify_checkpoint(ckpt)
            if problem is None:
                return ckpt
            if main:
                set_aside(ckpt, f"damaged, {problem}")
        return None
    path = Path(resume)
    match = _NAME.match(path.name)
    if not (match and (path / INFO_FILE).is_file()):
        raise UserError(f"not a complete calibrl checkpoint: {path}")
    ckpt = Checkpoint(path, int(match.group(1)))
    problem = verify_checkpoint(ckpt)
    if problem is not None:
        raise UserError(f"checkpoint {path} is damaged: {problem}")
    return ckpt


def save_checkpoint(run_dir: Path, step: int, *, model: Any, tokenizer: Any,
                    trainer_state: dict[str, Any], keep_last: int,
                    model_state: dict[str, Any] | None = None,
                    state_dir: Path | None = None) -> Checkpoint:
    """Write checkpoint `step` atomically, then delete all but the newest `keep_last`.

    `model` is an unwrapped `PreTrainedModel` (saved with `model_state` as its weights when
    given: the gathered ones of a sharded run); `trainer_state` holds optimiser/scheduler state
    dicts, data position and anything else needed to resume (RNG states are added here);
    `state_dir`, a folder written by accelerate's `save_state`, is moved in as `accelerate/`.
    """
    final = run_dir / f"checkpoint-{step:06d}"
    recover(run_dir)  # temporaries of a run killed mid-save
    try:
        with atomic_dir(final) as tmp:
            model.save_pretrained(tmp / "model", state_dict=model_state)  # None: the model's own
            tokenizer.save_pretrained(tmp / "model")
            if state_dir is not None:
                shutil.move(str(state_dir), str(tmp / ACCELERATE_DIR))
            torch.save({**trainer_state, "rng": rng_state(), "step": step}, tmp / STATE_FILE)
            info = {"step": step, "files": _file_hashes(tmp)}
            (tmp / INFO_FILE).write_text(json.dumps(info, indent=1) + "\n")
    finally:
        if state_dir is not None:  # still there only if the save failed before moving it in
            shutil.rmtree(state_dir, ignore_errors=True)
    for old in list_checkpoints(run_dir)[:-keep_last]:
        shutil.rmtree(old.path, ignore_errors=True)
    return Checkpoint(final, step)
