"""Raw data rows as checked `TaskExample`s: the reading that needs a task.

A row is a verl/TinyZero row (`data_source`, `prompt`, `reward_model`, ...; layout in
`calibrl.data.example`) or a public Countdown-Tasks-3to4 row `{"target", "nums"}`, whose prompt
is built with the task's own wording. The caller says which task a `data_source` names
(`task_of`): the registry for any file (`calibrl.tasks.files.load_examples`), or a task
accepting only its own rows when it converts a file (`Task.convert_file`). So this module and
the tasks that use it never import the registry, which imports them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from calibrl.data.example import TaskExample, as_integer, as_messages, short_repr
from calibrl.errors import UserError
from calibrl.tasks.base import Task
from calibrl.tasks.convert import read_mapped_rows

TaskOf = Callable[[str], Task]  # data_source -> its task; `UserError` if it names none
VERL_KEYS = ("data_source", "prompt", "reward_model")
RAW_KEYS = ("target", "nums")
RAW_ROWS_TASK = "countdown"  # the task of `RAW_KEYS` rows
# The columns read here: the targets a column mapping may name.
COLUMNS = (*VERL_KEYS, "ability", "extra_info", *RAW_KEYS)


def _from_verl(row: Mapping[str, Any], position: int, task_of: TaskOf) -> TaskExample:
    source = row["data_source"]
    if not isinstance(source, str):
        raise UserError(f"data_source is {short_repr(source)}, expected a string")
    task = task_of(source)
    reward_model = row["reward_model"]
    if not isinstance(reward_model, Mapping) or "ground_truth" not in reward_model:
        raise UserError(
            f"reward_model is {short_repr(reward_model)}, expected {{'ground_truth': ...}}")
    ground_truth = task.check_ground_truth(reward_model["ground_truth"])
    extra = row.get("extra_info") or {}
    if not isinstance(extra, Mapping):
        raise UserError(f"extra_info is {short_repr(extra)}, expected a mapping")
    extra = dict(extra)
    split = extra.pop("split", None)
    index = extra.pop("index", None)
    ability = row.get("ability", "math")
    if split is not None and not isinstance(split, str):
        raise UserError(f"extra_info.split is {short_repr(split)}, expected a string")
    if not isinstance(ability, str):
        raise UserError(f"ability is {short_repr(ability)}, expected a string")
    index = position if index is None else as_integer(index, "extra_info.index")
    return TaskExample(source, as_messages(row["prompt"]), ground_truth, index, split, extra,
                       ability)


def _from_raw(row: Mapping[str, Any], position: int, task_of: TaskOf) -> TaskExample:
    task = task_of(RAW_ROWS_TASK)
    ground_truth = task.check_ground_truth({"target": row["target"], "numbers": row["nums"]})
    return TaskExample(task.name, task.make_prompt(ground_truth), ground_truth, position)


def example_from_row(row: Any, position: int, task_of: TaskOf) -> TaskExample:
    """A checked `TaskExample` from a verl/TinyZero row or a `{"target", "nums"}` row.

    `position` (the row's place in its file) is the index when the row does not carry one.
    Raises `UserError` saying what is wrong; the caller adds which file and row.
    """
    if not isinstance(row, Mapping):
        raise UserError(f"row is {short_repr(row)}, expected an object")
    if any(key in row for key in VERL_KEYS):
        missing = [key for key in VERL_KEYS if key not in row]
        convert = _from_verl
    else:
        missing = [key for key in RAW_KEYS if key not in row]
        convert = _from_raw
    if missing:
        raise UserError(
            f"missing {', '.join(map(repr, missing))}: expected the verl columns "
            f"({', '.join(VERL_KEYS)}) or a {{{', '.join(RAW_KEYS)}}} row"
        )
    return convert(row, position, task_of)


def read_examples(path: str | Path, task_of: TaskOf,
                  columns: Mapping[str, str] | None = None) -> list[TaskExample]:
    """Every row of a data file, folder or Hub data set (`calibrl.data.sources`) as a checked
    `TaskExample`, columns held under other names renamed by `columns` (`{target: source}`,
    targets from `COLUMNS`); a malformed row raises `UserError` naming the file, the row
    (0-based) and what is wrong."""
    examples = []
    rows = read_mapped_rows(path, columns, known=COLUMNS, reader="the verl row reader")
    for position, row in enumerate(rows):
        try:
            examples.append(example_from_row(row, position, task_of))
        except UserError as err:
            raise UserError(f"{path} row {position}: {err}") from None
    return examples
