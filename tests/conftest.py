"""Shared test settings and the fixtures many test folders use, built once per session."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# CI has 2 slow cores: keep property tests deterministic and bounded.
settings.register_profile(
    "calibrl", max_examples=300, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("calibrl")

TINY = {"hidden_size": 32, "num_layers": 1, "num_heads": 2}


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The smallest tiny model (`TINY`, seed 0), saved once per session. Tests only read it:
    a test that changes a model builds or copies its own."""
    from calibrl.models import create_tiny_model

    return create_tiny_model(tmp_path_factory.mktemp("tiny") / "model", **TINY)
