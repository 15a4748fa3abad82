"""Data files through their tasks: every row checked against the task its `data_source` names,
and examples written with that task's Arrow schema (`Task.arrow_schema`).

The storage underneath (readers, atomic writes, the verl layout) is `calibrl.data`; this module
adds what needs the task registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from calibrl.data.example import TaskExample
from calibrl.data.parquet import rows_to_table, write_table, write_tables
from calibrl.errors import UserError
from calibrl.tasks.base import DEFAULT_TASK
from calibrl.tasks.registry import get_task
from calibrl.tasks.rows import example_from_row as _example_from_row
from calibrl.tasks.rows import read_examples


def example_from_row(row: Any, position: int) -> TaskExample:
    """A checked `TaskExample` from a verl/TinyZero or `{"target", "nums"}` row, checked by the
    task its `data_source` names (`calibrl.tasks.rows.example_from_row`)."""
    return _example_from_row(row, position, get_task)


def load_examples(path: str | Path, columns: Mapping[str, str] | None = None
                  ) -> list[TaskExample]:
    """Every row of a data file, folder or Hub data set (`calibrl.data.sources`) as a checked
    `TaskExample`.

    Reads verl/TinyZero rows (ours or TinyZero's own files) and the public Countdown
    `{"target", "nums"}` rows; `columns` (`{target: source}`, e.g. `{"nums": "numbers"}`)
    renames columns the data hold under other names (`calibrl.tasks.rows.COLUMNS` are the
    targets). A malformed row raises `UserError` naming the file, the row (0-based) and what
    is wrong.
    """
    return read_examples(path, get_task, columns)


def examples_to_table(examples: list[TaskExample]) -> pa.Table:
    """Examples (all of one task) as an Arrow table with that task's schema; an empty list
    gets the schema of `DEFAULT_TASK`."""
    tasks = {get_task(e.data_source).name for e in examples} or {DEFAULT_TASK}
    if len(tasks) > 1:
        raise UserError(f"one file holds one task, got {', '.join(sorted(tasks))}")
    (task_name,) = tasks
    return rows_to_table([e.to_row() for e in examples], get_task(task_name).arrow_schema())


def write_examples(path: str | Path, examples: list[TaskExample]) -> Path:
    """Write `examples` as one parquet file, atomically; returns the path written."""
    return write_table(path, examples_to_table(examples))


def write_splits(out_dir: str | Path, splits: Mapping[str, list[TaskExample]]) -> dict[str, Path]:
    """Write each split as `out_dir/NAME.parquet`, all in one atomic swap of the folder (its
    other files stay); returns the paths by split name."""
    return write_tables(out_dir, {name: examples_to_table(examples)
                                  for name, examples in splits.items()})
