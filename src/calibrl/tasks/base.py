"""What a task is, and the `data_source -> task` registry.

A task knows three things: how to turn a data row into chat messages, how to verify an answer
(bool, used by the calibration reward and the probe), and the reward-manager score of a full
decoded prompt+response string (verl semantics, e.g. Countdown's 0 / 0.1 / 1.0).
The registry replaces verl's `_select_rm_score_fn` if/elif chain: tasks register themselves by
the `data_source` names they answer to.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from calibrl.errors import UserError

ScoreFn = Callable[..., float]


@runtime_checkable
class Task(Protocol):
    """A verifiable task.

    Attributes:
        name: canonical `data_source` value written into data files.
        failure_score: what the reward manager writes when scoring a row fails or times out.
    """

    name: str
    failure_score: float

    def build_messages(self, ground_truth: Mapping[str, Any]) -> list[dict[str, str]]:
        """Chat messages (`[{"role": ..., "content": ...}]`) that pose this problem."""
        ...

    def verify(self, answer_text: str, ground_truth: Mapping[str, Any]) -> bool:
        """True iff `answer_text` (a completion, or just its answer part) is correct."""
        ...

    def score(self, solution_str: str, ground_truth: Mapping[str, Any]) -> float:
        """Reward-manager score of a decoded prompt+response string."""
        ...

    def difficulty(self, ground_truth: Mapping[str, Any]) -> str:
        """A short label of the problem's difficulty group (metrics are reported per group)."""
        ...


_REGISTRY: dict[str, Task] = {}


def register_task(task: Task, *aliases: str) -> Task:
    """Make `task` answer to `task.name` and each alias as a `data_source`."""
    for source in (task.name, *aliases):
        if source in _REGISTRY and _REGISTRY[source] is not task:
            raise ValueError(f"data_source {source!r} is already registered")
        _REGISTRY[source] = task
    return task


def known_sources() -> list[str]:
    _ensure_builtin_tasks()
    return sorted(_REGISTRY)


def get_task(data_source: str) -> Task:
    """The task registered for `data_source`; a clear `UserError` naming the known ones if none."""
    _ensure_builtin_tasks()
    try:
        return _REGISTRY[data_source]
    except KeyError:
        raise UserError(
            f"unknown data_source {data_source!r}; known: {', '.join(known_sources())}"
        ) from None


def select_score_fn(data_source: str) -> ScoreFn:
    """verl's `_select_rm_score_fn`: the `score(solution_str, ground_truth)` for a source."""
    return get_task(data_source).score


def import_task_modules(modules: list[str]) -> None:
    """Import user modules that register their own tasks; a missing one is a `UserError`."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as err:
            raise UserError(f"cannot import task module {name!r}: {err}") from None


def _ensure_builtin_tasks() -> None:
    # Importing registers them; done lazily so `calibrl.tasks.base` has no import cycle.
    import calibrl.tasks.countdown  # noqa: F401
