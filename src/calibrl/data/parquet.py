"""Read and write data files: parquet in the verl/TinyZero schema, JSON and JSON lines.

Writes are atomic (a temporary file in the same folder, then `os.replace`), so a reader never sees
half a file and an interrupted run leaves the old file in place. Tables that belong together
(train and test) are swapped in together (`write_tables`), so a kill never pairs a new train split
with an old test split that shares its problems.

Each task fixes the Arrow type of its columns (`Task.arrow_schema`, built with `verl_schema`), so a
split with no rows still carries the full schema and the same rows always give the same bytes;
writing examples with their task's schema is `calibrl.tasks.files`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from calibrl.errors import UserError, missing_file
from calibrl.utils.atomic import atomic_dir, atomic_file

_MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
_EXTRA_BASE = [("split", pa.string()), ("index", pa.int64())]
SUFFIXES = (".parquet", ".json", ".jsonl")


def verl_schema(ground_truth: pa.DataType,
                extra_types: Iterable[tuple[str, pa.DataType]] = ()) -> pa.Schema:
    """The verl/TinyZero schema with this ground_truth type; `extra_types` are the extra_info
    fields after `split` and `index`."""
    extra = pa.struct([*_EXTRA_BASE, *extra_types])
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", _MESSAGES),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", ground_truth)])),
            ("extra_info", extra),
        ]
    )


def _with_extra_types(schema: pa.Schema, extra_types: list[tuple[str, pa.DataType]]) -> pa.Schema:
    at = schema.get_field_index("extra_info")
    fields = [*schema.field(at).type, *(pa.field(name, type_) for name, type_ in extra_types)]
    return schema.set(at, pa.field("extra_info", pa.struct(fields)))


def rows_to_table(rows: list[dict[str, Any]], schema: pa.Schema | None) -> pa.Table:
    """verl rows as an Arrow table with `schema` (None: the types Arrow infers).

    extra_info keys the schema does not name keep the type Arrow infers for them (they would
    otherwise be dropped). `UserError` when a value does not fit its type.
    """
    try:
        if schema is None:
            return pa.Table.from_pylist(rows)
        known = set(schema.field("extra_info").type.names)
        others = sorted({key for row in rows for key in row["extra_info"]} - known)
        extra_types = [(k, pa.array([r["extra_info"].get(k) for r in rows]).type) for k in others]
        return pa.Table.from_pylist(rows, schema=_with_extra_types(schema, extra_types))
    except (pa.ArrowException, OverflowError) as err:  # e.g. a number beyond int64
        raise UserError(f"cannot store these rows as parquet: {err}".replace("\n", " ")) from None


def write_table(path: str | Path, table: pa.Table) -> Path:
    """Write `table` as one parquet file, atomically; returns the path written."""
    path = Path(path)
    with atomic_file(path) as tmp:
        pq.write_table(table, tmp)
    return path


def write_tables(out_dir: str | Path, tables: Mapping[str, pa.Table]) -> dict[str, Path]:
    """Write each table as `out_dir/NAME.parquet`, all in one atomic swap of the folder (its
    other files stay); returns the paths by name."""
    out_dir = Path(out_dir)
    files = {name: f"{name}.parquet" for name in tables}
    with atomic_dir(out_dir, own=set(files.values())) as tmp:
        for name, table in tables.items():
            pq.write_table(table, tmp / files[name])
    return {name: out_dir / file for name, file in files.items()}


def _int_limit_message(err: ValueError) -> str:
    # json.loads raises a plain ValueError for an integer over Python's int-string conversion
    # limit (4,300 digits by default); its advice to raise the limit is not the user's fix.
    return f"{err}".split(";")[0].replace("Exceeds the limit", "an integer exceeds the limit")


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
        raise missing_file(path)
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
