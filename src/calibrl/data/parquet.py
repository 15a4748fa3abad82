"""Read and write data files: parquet in the verl/TinyZero schema, JSON and JSON lines.

Writes are atomic (a temporary file in the same folder, then `os.replace`), so a reader never sees
half a file and an interrupted run leaves the old file in place. Splits that belong together
(train and test) are swapped in together (`write_splits`), so a kill never pairs a new train split
with an old test split that shares its problems. Each column has a fixed Arrow
type, so a split with no rows still carries the full schema and the same rows always give the
same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from calibrl.data.example import TaskExample, example_from_row
from calibrl.errors import UserError
from calibrl.tasks import get_task
from calibrl.utils.atomic import atomic_dir, atomic_file

_MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
_EXTRA_BASE = [("split", pa.string()), ("index", pa.int64())]

# Per task: the ground_truth type and the task's own extra_info fields.
_TASK_TYPES: dict[str, tuple[pa.DataType, list[tuple[str, pa.DataType]]]] = {
    "countdown": (
        pa.struct([("target", pa.int64()), ("numbers", pa.list_(pa.int64()))]),
        [("solution", pa.string()), ("steps", pa.list_(pa.string()))],
    ),
    "numeric_qa": (
        pa.struct([("question", pa.string()), ("answer", pa.string()),
                   ("num_steps", pa.int64())]),
        [("solution", pa.string()), ("steps", pa.list_(pa.string()))],
    ),
}
DEFAULT_TASK = "countdown"  # schema of a file with no rows
SUFFIXES = (".parquet", ".json", ".jsonl")


def arrow_schema(task_name: str, extra_types: Iterable[tuple[str, pa.DataType]] = ()) -> pa.Schema:
    """The verl/TinyZero schema for one task's rows; `extra_types` adds extra_info fields."""
    ground_truth, task_extra = _TASK_TYPES[task_name]
    extra = pa.struct([*_EXTRA_BASE, *task_extra, *extra_types])
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", _MESSAGES),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", ground_truth)])),
            ("extra_info", extra),
        ]
    )


def examples_to_table(examples: list[TaskExample]) -> pa.Table:
    """Examples (all of one task) as an Arrow table with that task's schema."""
    tasks = {get_task(e.data_source).name for e in examples} or {DEFAULT_TASK}
    if len(tasks) > 1:
        raise UserError(f"one file holds one task, got {', '.join(sorted(tasks))}")
    (task_name,) = tasks
    rows = [e.to_row() for e in examples]
    if task_name not in _TASK_TYPES:  # a task without a declared schema: Arrow infers one
        try:
            return pa.Table.from_pylist(rows)
        except (pa.ArrowException, OverflowError) as err:
            raise UserError(f"cannot store these rows as parquet: {err}".replace("\n", " ")
                            ) from None
    known = set(arrow_schema(task_name).field("extra_info").type.names)
    # Keys the schema does not name keep the type Arrow infers (they would otherwise be dropped).
    others = sorted({key for row in rows for key in row["extra_info"]} - known)
    try:
        extra_types = [(k, pa.array([r["extra_info"].get(k) for r in rows]).type) for k in others]
        return pa.Table.from_pylist(rows, schema=arrow_schema(task_name, extra_types))
    except (pa.ArrowException, OverflowError) as err:  # e.g. a number beyond int64
        raise UserError(f"cannot store these rows as parquet: {err}".replace("\n", " ")) from None


def write_examples(path: str | Path, examples: list[TaskExample]) -> Path:
    """Write `examples` as one parquet file, atomically; returns the path written."""
    path = Path(path)
    table = examples_to_table(examples)
    with atomic_file(path) as tmp:
        pq.write_table(table, tmp)
    return path


def _int_limit_message(err: ValueError) -> str:
    # json.loads raises a plain ValueError for an integer over Python's int-string conversion
    # limit (4,300 digits by default); its advice to raise the limit is not the user's fix.
    return f"{err}".split(";")[0].replace("Exceeds the limit", "an integer exceeds the limit")


def write_splits(out_dir: str | Path, splits: Mapping[str, list[TaskExample]]) -> dict[str, Path]:
    """Write each split as `out_dir/NAME.parquet`, all in one atomic swap of the folder (its
    other files stay); returns the paths by split name."""
    out_dir = Path(out_dir)
    tables = {name: examples_to_table(examples) for name, examples in splits.items()}
    files = {name: f"{name}.parquet" for name in splits}
    with atomic_dir(out_dir, own=set(files.values())) as tmp:
        for name, table in tables.items():
            pq.write_table(table, tmp / files[name])
    return {name: out_dir / file for name, file in files.items()}


def _json_rows(path: Path, text: str) -> list[Any]:
    """A JSON array of rows, or JSON lines (one row per non-empty line)."""
    if path.suffix == ".json" and text.lstrip().startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise UserError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None
        except ValueError as err:
            raise UserError(f"{path}: {_int_limit_message(err)}") from None
    rows = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise UserError(f"{path}: line {lineno} is not valid JSON ({err.msg})") from None
            except ValueError as err:
                raise UserError(f"{path}: line {lineno}: {_int_limit_message(err)}") from None
    return rows


def read_rows(path: str | Path) -> list[Any]:
    """The raw rows of a `.parquet`, `.json` (array or JSON lines) or `.jsonl` file."""
    path = Path(path)
    if path.suffix not in SUFFIXES:
        raise UserError(f"{path}: unknown file type; expected one of {', '.join(SUFFIXES)}")
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    if path.suffix == ".parquet":
        try:
            return pq.read_table(path).to_pylist()
        except (pa.ArrowException, OSError) as err:
            raise UserError(f"{path}: cannot read as parquet ({err})".replace("\n", " ")) from None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: cannot read ({err})") from None
    return _json_rows(path, text)


def load_examples(path: str | Path) -> list[TaskExample]:
    """Every row of a data file, folder or Hub data set (`calibrl.data.sources`) as a checked
    `TaskExample`.

    Reads verl/TinyZero rows (ours or TinyZero's own files) and the public Countdown
    `{"target", "nums"}` rows. A malformed row raises `UserError` naming the file, the row
    (0-based) and what is wrong.
    """
    from calibrl.data.sources import read_source_rows  # sources builds on this module

    examples = []
    for position, row in enumerate(read_source_rows(path)):
        try:
            examples.append(example_from_row(row, position))
        except UserError as err:
            raise UserError(f"{path} row {position}: {err}") from None
    return examples
