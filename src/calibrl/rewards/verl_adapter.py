"""verl custom reward function.

Point verl at this file::

    custom_reward_function.path=$(python -c "import calibrl.rewards.verl_adapter as m; print(m.__file__)")
    custom_reward_function.name=compute_score

verl calls `compute_score(data_source, solution_str, ground_truth, extra_info)` once per response;
we dispatch on `data_source` through calibrl's task registry, so the score is exactly calibrl's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calibrl.tasks import get_task


def compute_score(data_source: str, solution_str: str, ground_truth: Mapping[str, Any],
                  extra_info: Mapping[str, Any] | None = None) -> float:
    """calibrl's score for one verl response (`extra_info` is accepted and unused)."""
    return float(get_task(data_source).score(solution_str, ground_truth))
