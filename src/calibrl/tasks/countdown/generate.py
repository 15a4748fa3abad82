"""Generate Countdown instances, each proven solvable, split into train and test.

How an instance is drawn (all from one `random.Random(seed)`, so a seed fixes the output):

1. its size `k` from `num_numbers = (lo, hi)` inclusive: uniform, or in proportion to
   `size_weights` (one weight per size, lo first);
2. `k` numbers uniform in `1..max_number`, with replacement (repeats allowed, as in TinyZero);
3. a target uniform in `target_range = (lo, hi)` inclusive;
4. if the solver finds no expression, or the same sorted numbers and target were drawn before,
   steps 2-3 are redrawn with the same `k`. So the data are uniform over the solvable instances
   of each size, and the mix of sizes follows the weights even though 3 numbers reach a target
   in a 1..100 range far less often than 4 do.
5. with `size_weights`, a size that yields no new instance in `max_tries_per_row` draws is used
   up (there are only 562 solvable 2-number problems with numbers 1..20 and targets 1..100): it
   is dropped and the draw continues over the other sizes, so the earlier rows (the test split)
   keep the asked-for mix and the training split takes what is left. Without weights, or when
   no size with a positive weight is left, running out is an error.

The first `test_size` instances form the test split and the rest the train split, so growing `n`
with the same seed adds training data without changing the test set.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from math import comb

from calibrl.errors import UserError
from calibrl.tasks.countdown.solver import MAX_NUMBERS, Solution, solve
from calibrl.tasks.splits import resolve_test_size

DEFAULT_NUM_NUMBERS = (3, 4)
DEFAULT_MAX_NUMBER = 100
DEFAULT_TARGET_RANGE = (1, 100)


@dataclass(frozen=True)
class CountdownInstance:
    """One problem: reach `target` with each of `numbers` once; `solution` is a reference."""

    numbers: tuple[int, ...]
    target: int
    solution: Solution

    @property
    def ground_truth(self) -> dict[str, object]:
        return {"target": self.target, "numbers": list(self.numbers)}


def instance_key(numbers: tuple[int, ...] | list[int], target: int) -> tuple[tuple[int, ...], int]:
    """Two instances are the same problem iff their sorted numbers and targets are equal."""
    return tuple(sorted(numbers)), target


def count_instances(
    num_numbers: tuple[int, int], max_number: int, target_range: tuple[int, int]
) -> int:
    """Distinct instances (solvable or not) the drawing can produce: an upper bound for `n`."""
    multisets = sum(comb(max_number + k - 1, k) for k in range(num_numbers[0], num_numbers[1] + 1))
    return multisets * (target_range[1] - target_range[0] + 1)


def _check_config(
    n: int, num_numbers: tuple[int, int], max_number: int, target_range: tuple[int, int]
) -> None:
    lo, hi = num_numbers
    if not 1 <= lo <= hi <= MAX_NUMBERS:
        raise UserError(
            f"numbers per instance must satisfy 1 <= min <= max <= {MAX_NUMBERS}, got {lo}..{hi}"
        )
    if max_number < 1:
        raise UserError(f"max number must be at least 1, got {max_number}")
    if target_range[0] > target_range[1]:
        raise UserError(f"target range is empty: {target_range[0]}..{target_range[1]}")
    if n < 1:
        raise UserError(f"n must be at least 1, got {n}")
    space = count_instances(num_numbers, max_number, target_range)
    if n > space:
        raise UserError(
            f"n={n} is more than the {space} distinct instances with {lo}..{hi} numbers in "
            f"1..{max_number} and targets in {target_range[0]}..{target_range[1]}"
        )


def generate_countdown(
    n: int,
    *,
    num_numbers: tuple[int, int] = DEFAULT_NUM_NUMBERS,
    max_number: int = DEFAULT_MAX_NUMBER,
    target_range: tuple[int, int] = DEFAULT_TARGET_RANGE,
    seed: int = 0,
    test_size: int | None = None,
    test_fraction: float | None = None,
    max_tries_per_row: int = 10_000,
    size_weights: tuple[float, ...] | None = None,
) -> tuple[list[CountdownInstance], list[CountdownInstance]]:
    """`n` distinct solvable instances as `(train, test)`; see the module docstring for how.

    Args:
        n: total number of instances over both splits.
        num_numbers: inclusive range of how many numbers an instance has.
        max_number: numbers are drawn from `1..max_number`.
        target_range: inclusive range of targets.
        seed: seeds the only random generator used; same arguments give the same instances.
        test_size / test_fraction: size of the test split (at most one; see
            `resolve_test_size`).
        max_tries_per_row: draws allowed for one instance before its size counts as used up
            (step 5 of the module docstring); with no size left, `UserError`.
        size_weights: relative weight of each size `lo..hi` (None: uniform).
    """
    _check_config(n, num_numbers, max_number, target_range)
    n_test = resolve_test_size(n, test_size, test_fraction)
    sizes = list(range(num_numbers[0], num_numbers[1] + 1))
    weights = _check_weights(size_weights, sizes)
    rng = random.Random(seed)
    seen: set[tuple[tuple[int, ...], int]] = set()
    instances: list[CountdownInstance] = []
    while len(instances) < n:
        k = rng.randint(*num_numbers) if weights is None else rng.choices(sizes, weights)[0]
        instance = _draw_new(k, max_number, target_range, rng, seen, max_tries_per_row)
        if instance is not None:
            instances.append(instance)
            continue
        if weights is not None:
            i = sizes.index(k)
            del sizes[i], weights[i]
            if sum(weights) > 0:  # the sizes left can still be drawn
                continue
        raise UserError(
            f"found only {len(instances)} of n={n} distinct solvable instances: "
            f"{max_tries_per_row} draws in a row with {k} numbers gave no new one; "
            "lower n or widen the number or target ranges"
        )
    return instances[n_test:], instances[:n_test]


def _check_weights(size_weights: tuple[float, ...] | None, sizes: list[int]) -> list[float] | None:
    if size_weights is None:
        return None
    weights = [float(w) for w in size_weights]
    if len(weights) != len(sizes):
        raise UserError(f"give one size weight per size {sizes[0]}..{sizes[-1]} "
                        f"({len(sizes)}), got {len(weights)}")
    if not all(math.isfinite(w) and w >= 0 for w in weights) or sum(weights) <= 0:
        raise UserError(f"size weights must be finite, >= 0 and not all 0, got {size_weights}")
    return weights


def _draw_new(k: int, max_number: int, target_range: tuple[int, int], rng: random.Random,
              seen: set[tuple[tuple[int, ...], int]], tries: int) -> CountdownInstance | None:
    """A solvable instance of size `k` not in `seen`, or None after `tries` draws."""
    for _ in range(tries):
        numbers = tuple(rng.randint(1, max_number) for _ in range(k))
        target = rng.randint(*target_range)
        key = instance_key(numbers, target)
        if key in seen:
            continue
        seen.add(key)  # solvable or not, never test this one again
        solution = solve(numbers, target)
        if solution is not None:
            return CountdownInstance(numbers, target, solution)
    return None
