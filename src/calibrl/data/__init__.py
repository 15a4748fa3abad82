"""Data: parquet in the verl/TinyZero schema, readers for public formats.

Iterate a data set as `TaskExample`s with `load_examples(path)` (a file, a folder or a Hub data
set id: `sources`); write one with `write_examples`.
A task makes its own data sets (`Task.generate`, `Task.convert_file`).
"""

from calibrl.data.example import TaskExample, example_from_row
from calibrl.data.parquet import (
    arrow_schema,
    load_examples,
    read_rows,
    write_examples,
    write_splits,
)

__all__ = [
    "TaskExample",
    "arrow_schema",
    "example_from_row",
    "load_examples",
    "read_rows",
    "write_examples",
    "write_splits",
]
