"""verl custom reward function.

Point verl (0.9 and later; before 0.9 the section was top-level `custom_reward_function`) at it::

    reward.custom_reward_function.path=$(python -c "import calibrl.rewards.verl_adapter as m; print(m.__file__)")
    reward.custom_reward_function.name=compute_score

verl loads the file as a module, merges `reward_kwargs` from its config into every call, and its
reward managers call `compute_score(data_source=..., solution_str=..., ground_truth=...,
extra_info=...)` once per response. A returned dict's `score` is the reward; every key is logged
(`reward_extra_info`), so `acc` shows the strict accuracy beside the score, which for Countdown
also pays 0.1 for a well-formed wrong answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calibrl.tasks import get_task


def compute_score(data_source: str, solution_str: str, ground_truth: Mapping[str, Any],
                  extra_info: Mapping[str, Any] | None = None, **kwargs: Any
                  ) -> dict[str, float]:
    """`{"score": reward, "acc": 1.0 or 0.0}` for one verl response, by calibrl's task registry.

    `extra_info` and any `reward_kwargs` verl passes are accepted and unused: calibrl's tasks
    score from the response and the ground truth alone.
    """
    task = get_task(data_source)
    return {"score": float(task.score(solution_str, ground_truth)),
            "acc": float(task.verify(solution_str, ground_truth))}
