"""verl custom reward function.

Point verl at it (the `reward.` prefix is verl 0.7.1's and later's spelling; before 0.7.1 the
section is top-level `custom_reward_function`, and verl 0.9 silently ignores that old spelling,
falling back to its default scorer, which raises for `countdown`)::

    reward.custom_reward_function.path=$(python -c "import calibrl.rewards.verl_adapter as m; print(m.__file__)")
    reward.custom_reward_function.name=compute_score

verl loads the file as a module, merges `reward_kwargs` from its config into every call, and its
reward managers call `compute_score(data_source=..., solution_str=..., ground_truth=...,
extra_info=...)` once per response, with the decoded response alone as `solution_str` (not the
prompt). A returned dict's `score` is the reward; every key is logged (`reward_extra_info`), so
`acc` shows the strict accuracy beside the score, which for Countdown also pays 0.1 for a
well-formed wrong answer.

A task's scorer that raises or runs past `score_timeout_s` (set it with
`reward.custom_reward_function.reward_kwargs.score_timeout_s=...`) gives the task's failure
score and a warning once per task, in whatever thread verl calls from (`calibrl.rewards.guard`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calibrl.rewards.guard import DEFAULT_TIMEOUT_S, call_limited, is_finite_score
from calibrl.tasks import Task, get_task


def _score_and_accuracy(task: Task, text: str, ground_truth: Mapping[str, Any]
                        ) -> tuple[float, float]:
    # One guarded call for both: `verify` bounds itself only in the main thread.
    return float(task.score(text, ground_truth)), float(task.verify(text, ground_truth))


def compute_score(data_source: str, solution_str: str, ground_truth: Mapping[str, Any],
                  extra_info: Mapping[str, Any] | None = None, *,
                  score_timeout_s: float | None = DEFAULT_TIMEOUT_S, **kwargs: Any
                  ) -> dict[str, float]:
    """`{"score": reward, "acc": 1.0 or 0.0}` for one verl response, by calibrl's task registry.

    `solution_str` is the decoded response (verl passes it without the prompt; a decoded
    prompt+response scores the same). A scorer that raises, runs past `score_timeout_s` seconds
    (None: no limit) or returns a non-finite score gives `{"score": task.failure_score,
    "acc": 0.0}`. `extra_info` and any other `reward_kwargs` verl passes are accepted and unused:
    calibrl's tasks score from the response and the ground truth alone. An unknown
    `data_source` is a configuration error and raises.
    """
    task = get_task(data_source)
    ok, result = call_limited(task.name, _score_and_accuracy, task, solution_str, ground_truth,
                              timeout_s=score_timeout_s)
    if not (ok and is_finite_score(task.name, result[0])):
        return {"score": float(task.failure_score), "acc": 0.0}
    return {"score": result[0], "acc": result[1]}
