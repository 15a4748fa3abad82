"""Data storage: the `TaskExample` value, parquet in the verl/TinyZero schema, JSON readers and
the sources rows come from (`sources`: a file, a folder or a Hub data set id).

Storage only: no task is imported here. Reading rows as checked examples and writing examples
with their task's schema is `calibrl.tasks.files` (`load_examples`, `write_examples`,
`write_splits`); a task makes its own data sets (`Task.generate`, `Task.convert_file`).
"""

from calibrl.data.example import TaskExample
from calibrl.data.parquet import read_rows, rows_to_table, verl_schema, write_table, write_tables

__all__ = ["TaskExample", "read_rows", "rows_to_table", "verl_schema", "write_table",
           "write_tables"]
