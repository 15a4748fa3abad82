"""The `data_source -> task` registry: `get_task` finds the task that poses, checks and scores a
row. It replaces verl's `_select_rm_score_fn` if/elif chain.

The built-in tasks are registered here, on the first look-up, rather than by their own packages:
a task module then never imports the registry, so the registry is the one module above every
task and no import circle runs through it. User tasks register themselves (`register_task`) in
modules named by `import_task_modules`.
"""

from __future__ import annotations

from collections.abc import Callable

from calibrl.errors import UserError
from calibrl.tasks.base import Task

ScoreFn = Callable[..., float]

_REGISTRY: dict[str, Task] = {}
_builtins_registered = False


def register_task(task: Task, *aliases: str) -> Task:
    """Make `task` answer to `task.name`, its `aliases` and each alias given as a
    `data_source`."""
    if not isinstance(task, Task):
        raise TypeError(f"{type(task).__name__} is not a calibrl.tasks.Task")
    for source in (task.name, *task.aliases, *aliases):
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
    # Lazy so that importing the registry (every scorer does) does not load every task's
    # generator and solver; the only import of a built-in task outside its own package.
    global _builtins_registered
    if _builtins_registered:
        return
    from calibrl.tasks.countdown import COUNTDOWN
    from calibrl.tasks.math_task import MATH
    from calibrl.tasks.multiple_choice import MULTIPLE_CHOICE
    from calibrl.tasks.numeric_qa import NUMERIC_QA
    from calibrl.tasks.short_answer import SHORT_ANSWER

    for task in (COUNTDOWN, NUMERIC_QA, SHORT_ANSWER, MULTIPLE_CHOICE, MATH):
        register_task(task)
    _builtins_registered = True
