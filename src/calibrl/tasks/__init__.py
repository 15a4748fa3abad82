"""Tasks: how to prompt for a problem and how to verify an answer."""

from calibrl.tasks.base import (
    Task,
    get_task,
    import_task_modules,
    known_sources,
    register_task,
    select_score_fn,
)

__all__ = ["Task", "get_task", "import_task_modules", "known_sources", "register_task",
           "select_score_fn"]
