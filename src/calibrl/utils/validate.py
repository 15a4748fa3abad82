"""Value checks for settings, as pure functions the settings classes can call.

Each returns the value when it is valid and raises `UserError` naming the setting otherwise, so a
bad value is refused when the settings are built, not minutes later by the library that uses it
(numpy refuses a seed outside [0, 2**32) only when the first generator is made; torch refuses
Adam betas only when the optimizer is built).
"""

from __future__ import annotations

import math

from calibrl.errors import UserError

SEED_LIMIT = 2**32  # numpy's and torch's seeds are unsigned 32-bit integers


def check_seed(value: int, name: str = "seed") -> int:
    """A seed in [0, 2**32)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < SEED_LIMIT:
        raise UserError(f"{name} must be an integer in [0, 2**32), got {value!r}")
    return value


def check_adam_betas(betas: tuple[float, float], name: str = "betas") -> tuple[float, float]:
    """Adam's (beta1, beta2), each in [0, 1) as torch requires."""
    if len(betas) != 2 or not all(_finite(b) and 0.0 <= b < 1.0 for b in betas):
        raise UserError(f"{name} must be two numbers in [0, 1), got {tuple(betas)!r}")
    return (float(betas[0]), float(betas[1]))


def check_positive(value: float, name: str) -> float:
    """A count, budget or rate that must be above 0 (and finite)."""
    if isinstance(value, bool) or not _finite(value) or value <= 0:
        raise UserError(f"{name} must be greater than 0, got {value!r}")
    return value


def check_non_negative(value: float, name: str) -> float:
    """A value that may be 0 but not below (a temperature, a coefficient); finite."""
    if isinstance(value, bool) or not _finite(value) or value < 0:
        raise UserError(f"{name} must be at least 0, got {value!r}")
    return value


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
