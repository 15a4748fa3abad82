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
from calibrl.tasks import get_task


def difficulty_of(example: TaskExample) -> str:
    """The example's difficulty label, from its task."""
    return get_task(example.data_source).difficulty(example.ground_truth)


def mix_by_difficulty(examples: Sequence[TaskExample], shares: Mapping[str, float],
                      seed: int = 0) -> list[TaskExample]:
    """The largest subset of `examples` whose groups stand in the ratio `shares`, shuffled.

    Rows keep their order within a group (the first ones are taken); groups not named in `shares`
    or with share 0 are left out. `UserError` if a named group with a positive share is empty.
    """
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
    unit = min(len(groups[label]) / share for label, share in wanted.items())
    out = [ex for label, share in wanted.items() for ex in groups[label][: int(unit * share)]]
    random.Random(seed).shuffle(out)
    return out
