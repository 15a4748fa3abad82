"""A run held after a chosen step until the test releases it (`sitecustomize` here)."""

import os
from pathlib import Path

FOLDER = Path(__file__).parent


def held_env(env: dict[str, str], step: int, release: Path) -> dict[str, str]:
    """`env` for a run that waits after step `step` until the file `release` exists."""
    path = os.pathsep.join([str(FOLDER), *filter(None, [env.get("PYTHONPATH")])])
    return {**env, "PYTHONPATH": path, "CALIBRL_TEST_HOLD_STEP": str(step),
            "CALIBRL_TEST_RELEASE": str(release)}
