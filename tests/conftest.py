"""Shared test settings."""

from hypothesis import HealthCheck, settings

# CI has 2 slow cores: keep property tests deterministic and bounded.
settings.register_profile(
    "calibrl", max_examples=300, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("calibrl")
