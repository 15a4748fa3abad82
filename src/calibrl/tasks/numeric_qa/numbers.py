"""Numbers of numeric QA: the strict reading of a model's answer, and the lenient reading of a
data file's answer column, both to exact rationals (`Fraction`), and one canonical text.

A model's answer (`parse_answer`) is a plain numeric literal and nothing else:

* an integer, `42`, `-3`, `+7`, optionally with thousands separators in groups of three,
  `1,234` (not `1,23`);
* a decimal, `2.5`, `-0.75` (digits on both sides of the point: `.5` and `5.` are refused);
* a fraction of two integers, `1/2`, `-3/4` (denominator not 0).

Nothing else counts: no units or words (`42 apples`), no `$`, `%`, exponents (`1e3`), `nan`,
`inf`, spaces inside the number, or non-ASCII digits. Text longer than `MAX_ANSWER_CHARS` is
refused before it is read, so `10**10000`-digit literals cost nothing. Two answers match when
their values are equal (`42` = `42.0` = `84/2`, `0.5` = `1/2`).

A data file's answer (`parse_truth`) may also be an int or a finite float, a string with
commas anywhere between digits, and a GSM8K solution whose final answer follows `####`
(`gsm8k_solution` splits its working lines from it).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from numbers import Integral, Real
from typing import Any

from calibrl.errors import UserError

MAX_ANSWER_CHARS = 100
GSM8K_MARKER = "####"

_INTEGER = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)"
_LITERAL = re.compile(
    rf"(?P<sign>[+-]?)(?:(?P<num>[0-9]+)/(?P<den>[0-9]+)|(?P<int>{_INTEGER})(?:\.(?P<frac>[0-9]+))?)"
)
_CALCULATOR_NOTE = re.compile(r"<<[^<>]*>>")  # GSM8K's "<<48/2=24>>" annotations


def parse_answer(text: Any) -> Fraction | None:
    """The exact value of a strict numeric literal (see the module doc), else None. Never raises."""
    if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
        return None
    match = _LITERAL.fullmatch(text.strip())
    if match is None:
        return None
    sign = -1 if match["sign"] == "-" else 1
    if match["den"] is not None:
        denominator = int(match["den"])
        return None if denominator == 0 else sign * Fraction(int(match["num"]), denominator)
    digits = match["int"].replace(",", "")
    decimals = match["frac"] or ""
    return sign * Fraction(int(digits + decimals), 10 ** len(decimals))


def format_number(value: Fraction) -> str:
    """The canonical text of a value: `42`, `-3`, `2.5` (a terminating decimal), else `1/3`."""
    if value.denominator == 1:
        return str(value.numerator)
    denominator, twos, fives = value.denominator, 0, 0
    while denominator % 2 == 0:
        denominator, twos = denominator // 2, twos + 1
    while denominator % 5 == 0:
        denominator, fives = denominator // 5, fives + 1
    if denominator != 1:
        return f"{value.numerator}/{value.denominator}"
    places = max(twos, fives)
    scaled = abs(value.numerator) * 10**places // value.denominator
    sign = "-" if value < 0 else ""
    return f"{sign}{scaled // 10**places}.{scaled % 10**places:0{places}d}"


def gsm8k_solution(text: str) -> tuple[list[str], str]:
    """(working lines, final answer text) of a GSM8K-style solution `"...\\n#### 72"`.

    The working lines lose their calculator notes (`<<48/2=24>>`) and blank lines. A text
    without `####` is all answer and no working.
    """
    working, marker, answer = text.rpartition(GSM8K_MARKER)
    if not marker:
        return [], text
    lines = (" ".join(_CALCULATOR_NOTE.sub("", line).split()) for line in working.splitlines())
    return [line for line in lines if line], answer


def parse_truth(value: Any) -> Fraction:
    """The value of a data file's answer (int, finite float or numeric text); else `UserError`."""
    if isinstance(value, bool):
        raise UserError(f"answer is {value!r}, expected a number")
    if isinstance(value, Integral):
        return Fraction(int(value))
    if isinstance(value, Real):
        if not math.isfinite(value):
            raise UserError(f"answer is {value!r}, expected a finite number")
        return Fraction(repr(float(value)))  # 0.1 reads as 1/10, not its binary neighbour
    if not isinstance(value, str):
        raise UserError(f"answer is {_short(value)}, expected a number")
    _, answer = gsm8k_solution(value)
    # Commas between digits are thousands separators in every data set we read ("1,000,000").
    parsed = parse_answer(re.sub(r"(?<=[0-9]),(?=[0-9])", "", answer))
    if parsed is None:
        raise UserError(f"answer {_short(answer.strip())} is not a number")
    return parsed


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
