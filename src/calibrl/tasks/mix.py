"""Re-weighting a data set by difficulty (`Task.difficulty`), e.g. to give RL the evaluation's mix.

A generator that runs out of easy problems leaves a training split that is mostly hard ones; RL
on such prompts sees almost no correct answer, so a confidence has nothing to rank. The subset
here restores chosen shares by taking as many rows of each group as the scarcest group allows.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from calibrl.data.example import TaskExample
from calibrl.errors import UserError
from calibrl.tasks.registry import get_task


def difficulty_of(example: TaskExample) -> str:
    """The example's difficulty label, from its task."""
    return get_task(example.data_source).difficulty(example.ground_truth)


def _groups_and_shares(examples: Sequence[TaskExample], shares: Mapping[str, float]
                       ) -> tuple[dict[str, list[TaskExample]], dict[str, float]]:
    """Rows by difficulty label, and the positive shares; `UserError` if a wanted group is empty."""
    groups: dict[str, list[TaskExample]] = {}
    for example in examples:
        groups.setdefault(difficulty_of(example), []).append(example)
    wanted = {label: float(share) for label, share in shares.items() if share > 0}
    if not wanted:
        raise UserError("give at least one difficulty group a positive share")
    missing = [label for label in wanted if not groups.get(label)]
    if missing:
        raise UserError(f"no example of difficulty {', '.join(missing)}; "
                        f"present: {', '.join(sorted(groups))}")
    return groups, wanted


def mix_by_difficulty(examples: Sequence[TaskExample], shares: Mapping[str, float],
                      seed: int = 0) -> list[TaskExample]:
    """The largest subset of `examples` whose groups stand in the ratio `shares`, shuffled.

    Rows keep their order within a group (the first ones are taken); groups not named in `shares`
    or with share 0 are left out. `UserError` if a named group with a positive share is empty.
    """
    groups, wanted = _groups_and_shares(examples, shares)
    unit = min(len(groups[label]) / share for label, share in wanted.items())
    out = [ex for label, share in wanted.items() for ex in groups[label][: int(unit * share)]]
    random.Random(seed).shuffle(out)
    return out


def resample_by_difficulty(examples: Sequence[TaskExample], shares: Mapping[str, float],
                           n: int, seed: int = 0) -> list[TaskExample]:
    """`n` rows whose groups stand in the ratio `shares`, repeating rows of scarce groups.

    Unlike `mix_by_difficulty`, nothing is cut to the scarcest group: a group with fewer rows
    than its share of `n` repeats them, every row as often as any other of its group (±1), in a
    fresh shuffled order each round. Group sizes are `n * share / sum(shares)` rounded so that
    they add up to `n` (largest remainders first). Groups not named or with share 0 are left out.
    `UserError` if `n < 1` or a named group with a positive share is empty.
    """
    if n < 1:
        raise UserError(f"resample to at least one row, not {n}")
    groups, wanted = _groups_and_shares(examples, shares)
    rng = random.Random(seed)
    out: list[TaskExample] = []
    for label, size in _apportion(wanted, n).items():
        rows = groups[label]
        while size > 0:
            round_ = rng.sample(rows, len(rows))
            out += round_[:size]
            size -= len(round_)
    rng.shuffle(out)
    return out


def _apportion(shares: Mapping[str, float], n: int) -> dict[str, int]:
    """Integer sizes adding up to `n`, proportional to `shares` (largest remainder method)."""
    total = sum(shares.values())
    exact = {label: n * share / total for label, share in shares.items()}
    sizes = {label: int(value) for label, value in exact.items()}
    by_remainder = sorted(exact, key=lambda label: exact[label] - sizes[label], reverse=True)
    for label in by_remainder[: n - sum(sizes.values())]:
        sizes[label] += 1
    return sizes
