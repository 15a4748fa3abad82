"""Data: parquet in the verl/TinyZero schema, readers for public formats.

Iterate a data set as `TaskExample`s with `load_examples(path)`; write one with `write_examples`.
"""

from calibrl.data.countdown import (
    Conversion,
    convert_countdown_file,
    countdown_example,
    examples_from_instances,
)
from calibrl.data.example import TaskExample, countdown_ground_truth, example_from_row
from calibrl.data.parquet import arrow_schema, load_examples, read_rows, write_examples

__all__ = [
    "Conversion",
    "TaskExample",
    "arrow_schema",
    "convert_countdown_file",
    "countdown_example",
    "countdown_ground_truth",
    "example_from_row",
    "examples_from_instances",
    "load_examples",
    "read_rows",
    "write_examples",
]
