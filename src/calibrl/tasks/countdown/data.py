"""Countdown data sets as train/test examples: generated instances, or an existing file converted.

Also the check of a Countdown ground truth read from a file (`countdown_ground_truth`) and the
Arrow schema of Countdown rows (`arrow_schema`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from calibrl.data.example import TaskExample, as_integer
from calibrl.data.parquet import verl_schema
from calibrl.errors import UserError
from calibrl.tasks.base import Conversion, Task
from calibrl.tasks.countdown.generate import CountdownInstance, instance_key
from calibrl.tasks.countdown.prompts import DEFAULT_PROMPT_STYLE, make_messages
from calibrl.tasks.countdown.solver import solve
from calibrl.tasks.rows import read_examples
from calibrl.tasks.splits import resolve_test_size

SOURCE = "countdown"


def arrow_schema() -> pa.Schema:
    """Countdown rows: ground truth `{target, numbers}`, the solver's `solution` and `steps`."""
    return verl_schema(
        pa.struct([("target", pa.int64()), ("numbers", pa.list_(pa.int64()))]),
        [("solution", pa.string()), ("steps", pa.list_(pa.string()))],
    )


def countdown_ground_truth(ground_truth: Any) -> dict[str, Any]:
    """`{"target": int, "numbers": [int >= 0, ...]}` checked and normalised, else `UserError`."""
    if not isinstance(ground_truth, Mapping):
        raise UserError(f"ground_truth is {ground_truth!r}, expected a mapping")
    for key in ("target", "numbers"):
        if key not in ground_truth:
            raise UserError(f"ground_truth has no {key!r}")
    target = as_integer(ground_truth["target"], "target")
    numbers = ground_truth["numbers"]
    if isinstance(numbers, (str, bytes, Mapping)) or not hasattr(numbers, "__iter__"):
        raise UserError(f"numbers is {numbers!r}, expected a list of integers")
    numbers = [as_integer(x, f"numbers[{i}]") for i, x in enumerate(numbers)]
    if not numbers:
        raise UserError("numbers is empty")
    if any(x < 0 for x in numbers):
        # The reward reads digits without signs: a negative number can never be matched.
        raise UserError(f"numbers {numbers} has a negative entry")
    return {"target": target, "numbers": numbers}


def countdown_example(
    ground_truth: dict, index: int, split: str | None, extra: dict | None = None,
    prompt_style: str = DEFAULT_PROMPT_STYLE,
) -> TaskExample:
    """An example whose prompt is the Countdown question of `ground_truth` in `prompt_style`."""
    return TaskExample(SOURCE, make_messages(ground_truth, prompt_style), ground_truth, index,
                       split, dict(extra or {}))


def examples_from_instances(instances: list[CountdownInstance], split: str,
                            prompt_style: str = DEFAULT_PROMPT_STYLE) -> list[TaskExample]:
    """Generated instances as examples of `split`, indexed 0.. in order, with their solutions."""
    return [
        countdown_example(
            inst.ground_truth,
            i,
            split,
            {"solution": inst.solution.expression, "steps": list(inst.solution.steps)},
            prompt_style,
        )
        for i, inst in enumerate(instances)
    ]


def convert_countdown_file(
    path: str | Path,
    task: Task,
    *,
    n: int | None = None,
    test_size: int | None = None,
    test_fraction: float | None = None,
    solve_rows: bool = True,
) -> Conversion:
    """Read a TinyZero/verl or `{target, nums}` file into our Countdown train/test examples.

    Rows are taken in file order; repeats of an earlier problem are dropped, and with
    `solve_rows` so are unsolvable ones, while the rest gain a reference solution and steps.
    The first `n` kept rows (all if None) are split as in `generate_countdown`: the first
    test-size rows are the test split. Prompts are rebuilt with our Countdown wording.
    Rows must name `task`, the Countdown task, or one of its aliases (it is passed in because
    the task imports this module, and the registry that holds it imports the task).
    """
    if n is not None and n < 1:
        raise UserError(f"n must be at least 1, got {n}")

    def countdown_only(source: str) -> Task:
        if source not in (task.name, *task.aliases):
            raise UserError(f"data_source {source!r} is not Countdown")
        return task

    examples = read_examples(path, countdown_only)
    seen: set[tuple[tuple[int, ...], int]] = set()
    kept: list[tuple[dict, dict]] = []
    duplicates = unsolvable = 0
    for position, example in enumerate(examples):
        if n is not None and len(kept) == n:
            break
        ground_truth = example.ground_truth
        key = instance_key(ground_truth["numbers"], ground_truth["target"])
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        extra = dict(example.extra)
        if solve_rows:
            try:
                solution = solve(ground_truth["numbers"], ground_truth["target"])
            except UserError as err:
                raise UserError(f"{path} row {position}: {err}") from None
            if solution is None:
                unsolvable += 1
                continue
            extra.update(solution=solution.expression, steps=list(solution.steps))
        kept.append((ground_truth, extra))
    if not kept or (n is not None and len(kept) < n):
        wanted = "" if n is None else f", fewer than n={n}"
        raise UserError(f"{path} has {len(kept)} usable rows{wanted}")
    n_test = resolve_test_size(len(kept), test_size, test_fraction)
    test = [countdown_example(gt, i, "test", extra) for i, (gt, extra) in enumerate(kept[:n_test])]
    train = [
        countdown_example(gt, i, "train", extra) for i, (gt, extra) in enumerate(kept[n_test:])
    ]
    return Conversion(train, test, len(examples), duplicates, unsolvable)
