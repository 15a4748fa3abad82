"""Holds a run between two steps until a test lets it go, so tests that signal a run at a known
step do not race it (a tiny model's step takes milliseconds). Python imports `sitecustomize` from
the path at start-up; `training.held_step.held_env` puts this folder first on the path of the
runs a test starts, and only theirs (accelerate's ranks inherit it).

With `CALIBRL_TEST_HOLD_STEP=N` and `CALIBRL_TEST_RELEASE=FILE` set, a process that has completed
and logged step N waits, before it looks for a stop request after that step, until FILE exists
(at most `HOLD_S`, so a run nobody releases still ends)."""

import os
import time
from pathlib import Path

HOLD_S = 120.0

if os.environ.get("CALIBRL_TEST_HOLD_STEP"):
    import calibrl.training.preemption as preemption

    _step = int(os.environ["CALIBRL_TEST_HOLD_STEP"])
    _release = Path(os.environ["CALIBRL_TEST_RELEASE"])
    _checkpoint_step = preemption.checkpoint_step

    def _held_checkpoint_step(stop, accelerator, *, step, **kwargs):
        deadline = time.monotonic() + HOLD_S
        while step == _step and not _release.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return _checkpoint_step(stop, accelerator, step=step, **kwargs)

    # Before the training loops import it by name.
    preemption.checkpoint_step = _held_checkpoint_step
