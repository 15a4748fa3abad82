"""Tasks: the protocol's `Task` interface (how to pose a problem, verify an answer, make data),
the registry that maps each `data_source` to its task (`get_task`), and reading and writing
data files through their tasks (`calibrl.tasks.files`; not imported here: it needs pyarrow,
scoring does not)."""

from calibrl.tasks.base import DEFAULT_TASK, Conversion, Task, safe_verify
from calibrl.tasks.registry import (
    get_task,
    import_task_modules,
    known_sources,
    register_task,
    select_score_fn,
)

__all__ = ["DEFAULT_TASK", "Conversion", "Task", "get_task", "import_task_modules",
           "known_sources", "register_task", "safe_verify", "select_score_fn"]
