"""Numeric QA traces for the supervised warm-up: the reference trace, and wrong traces.

A wrong trace makes the slip a model makes: one step's result is off by a little and every later
step carries the error on, so the think block and the answer agree and the answer is wrong.
Steps not in the generator's `"a op b = v"` shape (e.g. GSM8K's prose) are kept as they are and
only the final answer is off.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from calibrl.protocol.completions import answer_trace
from calibrl.tasks.numeric_qa.generate import OPERATIONS
from calibrl.tasks.numeric_qa.numbers import format_number, parse_answer

_STEP = re.compile(r"(-?[0-9]+) ([-+*]) ([0-9]+) = (-?[0-9]+)")
_SLIPS = (-2, -1, 1, 2)


def reference_trace(extra: Mapping[str, Any]) -> str | None:
    """The correct trace from an example's `extra` (`"solution"`, the canonical answer, and
    `"steps"`, possibly empty), or None if it has no solution."""
    solution = extra.get("solution")
    if not solution:
        return None
    return answer_trace(list(extra.get("steps") or ()), solution)


def slipped_steps(steps: Sequence[str], rng: random.Random) -> tuple[list[str], int] | None:
    """`steps` with one result off by 1 or 2 and the later steps recomputed from it, and the new
    final value; None unless every step has the generator's `"a op b = v"` shape."""
    parsed = [_STEP.fullmatch(step) for step in steps]
    if not parsed or not all(parsed):
        return None
    at = rng.randrange(len(parsed))
    out, value = [], None
    for i, match in enumerate(parsed):
        left = int(match[1]) if value is None else value
        op, right = match[2], int(match[3])
        value = OPERATIONS[op][0](left, right)
        if i == at:
            value += rng.choice(_SLIPS)
        out.append(f"{left} {op} {right} = {value}")
    return out, value


def wrong_trace(extra: Mapping[str, Any], rng: random.Random, verify: Callable[[str], bool],
                attempts: int = 20) -> str | None:
    """A turn-1 trace with a slip (see the module doc) that `verify` rejects, or None."""
    solution = parse_answer(extra.get("solution"))
    if solution is None:
        return None
    steps = list(extra.get("steps") or ())
    for _ in range(attempts):
        slipped = slipped_steps(steps, rng)
        if slipped is not None:
            candidate = answer_trace(slipped[0], str(slipped[1]))
        else:
            candidate = answer_trace(steps, format_number(solution + Fraction(rng.choice(_SLIPS))))
        if not verify(candidate):
            return candidate
    return None
