"""How a task's rows are split into train and test: the first test-size rows are the test split.

Shared by every task's `generate` and `convert_file`, so `--test-size` and `--test-fraction`
mean the same for each task. Growing `n` with the same seed (or the same file) then adds
training rows without changing the test split.
"""

from __future__ import annotations

from calibrl.errors import UserError

DEFAULT_TEST_FRACTION = 0.1


def resolve_test_size(n: int, test_size: int | None, test_fraction: float | None) -> int:
    """How many of `n` rows go to the test split; at most one of the two options may be given.

    Neither given: `DEFAULT_TEST_FRACTION`. A fraction rounds to the nearest row count.
    """
    if test_size is not None and test_fraction is not None:
        raise UserError("give either a test size or a test fraction, not both")
    if test_fraction is not None:
        if not 0.0 <= test_fraction <= 1.0:  # also false for NaN
            raise UserError(f"test fraction must be in [0, 1], got {test_fraction}")
        return round(n * test_fraction)
    if test_size is None:
        return round(n * DEFAULT_TEST_FRACTION)
    if not 0 <= test_size <= n:
        raise UserError(f"test size must be in [0, {n}] (the number of rows), got {test_size}")
    return test_size
