"""TRL-style reward functions: `(completions, **kwargs) -> list[float]`.

TRL passes the generated completions (strings, or lists of chat messages for conversational
datasets) and every other dataset column as a keyword list. We read the ground truth from a
verl/TinyZero `reward_model` column when present, else from `target` with `numbers` or `nums`
(the public Countdown-Tasks-3to4 columns), and the task from `data_source` (default Countdown).

A task's scorer that raises or runs past `timeout_s` gives that completion the task's failure
score (0.0 from the verifier with `binary`) and a warning once per task, never a stopped
training step, in whichever thread TRL calls from (`calibrl.rewards.guard`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from calibrl.errors import UserError
from calibrl.rewards.guard import DEFAULT_TIMEOUT_S, call_limited, is_finite_score
from calibrl.tasks import Task, get_task


def _completion_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content", ""))  # conversational: last assistant message
    raise TypeError(f"unsupported completion type {type(completion).__name__}")


def _ground_truths(n: int, kwargs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if "reward_model" in kwargs:
        return [row["ground_truth"] for row in kwargs["reward_model"]]
    numbers = kwargs.get("numbers", kwargs.get("nums"))
    if "target" in kwargs and numbers is not None:
        return [{"target": t, "numbers": list(ns)} for t, ns in zip(kwargs["target"], numbers, strict=True)]
    raise UserError(
        "reward function needs a 'reward_model' column or 'target' with 'numbers'/'nums'; "
        f"got columns: {', '.join(sorted(kwargs)) or 'none'}"
    )


def _one_score(task: Task, text: str, truth: Mapping[str, Any], binary: bool) -> float:
    return float(task.verify(text, truth)) if binary else float(task.score(text, truth))


def make_trl_reward(default_source: str = "countdown", *, binary: bool = False,
                    timeout_s: float | None = DEFAULT_TIMEOUT_S) -> Callable[..., list[float]]:
    """A TRL reward function scoring completions with calibrl's task scorers.

    Args:
        default_source: task used when the dataset has no `data_source` column.
        binary: return 1.0/0.0 from the task's verifier instead of its shaped score (0/0.1/1).
        timeout_s: wall-clock limit of one completion's scoring, in any thread; past it (or
            when the scorer raises or returns a non-finite score) the completion gets the
            failure score. None: no limit (exceptions are still caught).
    """

    def reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
        truths = _ground_truths(len(completions), kwargs)
        sources = kwargs.get("data_source") or [default_source] * len(completions)
        out = []
        for completion, truth, source in zip(completions, truths, sources, strict=True):
            task, text = get_task(source), _completion_text(completion)
            failure = 0.0 if binary else float(task.failure_score)
            ok, value = call_limited(task.name, _one_score, task, text, truth, binary,
                                     timeout_s=timeout_s)
            out.append(value if ok and is_finite_score(task.name, value) else failure)
        return out

    reward.__name__ = f"calibrl_{default_source}{'_binary' if binary else ''}"
    return reward


countdown_reward = make_trl_reward("countdown")
countdown_accuracy = make_trl_reward("countdown", binary=True)
