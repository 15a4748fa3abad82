"""One data row as a typed value, and the value checks every task's rows share.

A row on disk follows the verl/TinyZero schema::

    data_source   str                        which task scores it (see `calibrl.tasks`)
    prompt        [{"role", "content"}, ...]  the chat messages posing the problem
    ability       str                        "math"
    reward_model  {"style": "rule", "ground_truth": {...}}
    extra_info    {"split", "index", ...}     for Countdown also "solution" and "steps"

Turning a raw row into a `TaskExample` needs the row's task (to check its ground truth), so it
is `calibrl.tasks.rows`; this module knows no task.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

from calibrl.errors import UserError


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
    raise UserError(f"{what} is {short_repr(value)}, expected an integer")


def as_messages(prompt: Any) -> list[dict[str, str]]:
    """A row's `prompt` as checked chat messages; `UserError` saying what is wrong."""
    if isinstance(prompt, (str, bytes)) or not isinstance(prompt, (list, tuple)) or not prompt:
        raise UserError(f"prompt is {short_repr(prompt)}, expected a non-empty list of messages")
    messages = []
    for i, message in enumerate(prompt):
        if not isinstance(message, Mapping):
            raise UserError(f"prompt[{i}] is {short_repr(message)}, expected {{'role', 'content'}}")
        for key in ("role", "content"):
            if not isinstance(message.get(key), str):
                raise UserError(
                    f"prompt[{i}].{key} is {short_repr(message.get(key))}, expected a string"
                )
        messages.append({"role": message["role"], "content": message["content"]})
    return messages


def short_repr(value: Any, limit: int = 60) -> str:
    """`repr(value)`, cut to `limit` characters, for error messages about user data."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
