"""One data row as a typed value, and the checks that turn a raw row into one.

A row on disk follows the verl/TinyZero schema::

    data_source   str                        which task scores it (see `calibrl.tasks`)
    prompt        [{"role", "content"}, ...]  the chat messages posing the problem
    ability       str                        "math"
    reward_model  {"style": "rule", "ground_truth": {...}}
    extra_info    {"split", "index", ...}     for Countdown also "solution" and "steps"

The public Countdown-Tasks-3to4 rows are just `{"target", "nums"}`; `example_from_row` accepts both
and builds the prompt of the second kind with the task's own wording.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

from calibrl.errors import UserError
from calibrl.tasks import get_task

VERL_KEYS = ("data_source", "prompt", "reward_model")
RAW_KEYS = ("target", "nums")
RAW_ROWS_TASK = "countdown"  # the task of `RAW_KEYS` rows


@dataclass(frozen=True)
class TaskExample:
    """A problem, as the trainer, the evaluation and the probe iterate over it.

    Attributes:
        data_source: registered task name (`calibrl.tasks.get_task(data_source)` scores it).
        messages: chat messages `[{"role": ..., "content": ...}]` that pose the problem.
        ground_truth: what the task verifies; Countdown: `{"target": int, "numbers": [int]}`.
        index: position of the row in its split (`extra_info.index`).
        split: `"train"`, `"test"`, or None when the file did not say.
        extra: the rest of `extra_info`; Countdown: `"solution"` (str or None), `"steps"` (list).
        ability: verl's `ability` column.
    """

    data_source: str
    messages: list[dict[str, str]]
    ground_truth: dict[str, Any]
    index: int
    split: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    ability: str = "math"

    def to_row(self) -> dict[str, Any]:
        """The verl/TinyZero row for this example."""
        return {
            "data_source": self.data_source,
            "prompt": [dict(m) for m in self.messages],
            "ability": self.ability,
            "reward_model": {"style": "rule", "ground_truth": dict(self.ground_truth)},
            "extra_info": {"split": self.split, "index": self.index, **self.extra},
        }


def as_integer(value: Any, what: str) -> int:
    """`value` as an int; integral floats (JSON `5.0`, pandas) are accepted, bools are not."""
    if isinstance(value, bool):
        pass
    elif isinstance(value, Integral):
        return int(value)
    elif isinstance(value, Real) and math.isfinite(value) and value == int(value):
        return int(value)
    raise UserError(f"{what} is {_short(value)}, expected an integer")


def _messages(prompt: Any) -> list[dict[str, str]]:
    if isinstance(prompt, (str, bytes)) or not isinstance(prompt, (list, tuple)) or not prompt:
        raise UserError(f"prompt is {_short(prompt)}, expected a non-empty list of messages")
    messages = []
    for i, message in enumerate(prompt):
        if not isinstance(message, Mapping):
            raise UserError(f"prompt[{i}] is {_short(message)}, expected {{'role', 'content'}}")
        for key in ("role", "content"):
            if not isinstance(message.get(key), str):
                raise UserError(
                    f"prompt[{i}].{key} is {_short(message.get(key))}, expected a string"
                )
        messages.append({"role": message["role"], "content": message["content"]})
    return messages


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _from_verl(row: Mapping[str, Any], position: int) -> TaskExample:
    source = row["data_source"]
    if not isinstance(source, str):
        raise UserError(f"data_source is {_short(source)}, expected a string")
    task = get_task(source)  # UserError naming the known sources
    reward_model = row["reward_model"]
    if not isinstance(reward_model, Mapping) or "ground_truth" not in reward_model:
        raise UserError(f"reward_model is {_short(reward_model)}, expected {{'ground_truth': ...}}")
    ground_truth = task.check_ground_truth(reward_model["ground_truth"])
    extra = row.get("extra_info") or {}
    if not isinstance(extra, Mapping):
        raise UserError(f"extra_info is {_short(extra)}, expected a mapping")
    extra = dict(extra)
    split = extra.pop("split", None)
    index = extra.pop("index", None)
    ability = row.get("ability", "math")
    if split is not None and not isinstance(split, str):
        raise UserError(f"extra_info.split is {_short(split)}, expected a string")
    if not isinstance(ability, str):
        raise UserError(f"ability is {_short(ability)}, expected a string")
    index = position if index is None else as_integer(index, "extra_info.index")
    return TaskExample(source, _messages(row["prompt"]), ground_truth, index, split, extra, ability)


def _from_raw(row: Mapping[str, Any], position: int) -> TaskExample:
    # `{"target", "nums"}` rows are the public Countdown-Tasks-3to4 format.
    task = get_task(RAW_ROWS_TASK)
    ground_truth = task.check_ground_truth({"target": row["target"], "numbers": row["nums"]})
    return TaskExample(task.name, task.make_prompt(ground_truth), ground_truth, position)


def example_from_row(row: Any, position: int) -> TaskExample:
    """A checked `TaskExample` from a verl/TinyZero row or a `{"target", "nums"}` row.

    `position` (the row's place in its file) is the index when the row does not carry one.
    Raises `UserError` saying what is wrong; the caller adds which file and row.
    """
    if not isinstance(row, Mapping):
        raise UserError(f"row is {_short(row)}, expected an object")
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
    return convert(row, position)
