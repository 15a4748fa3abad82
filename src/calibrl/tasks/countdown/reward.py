"""Countdown reward: TinyZero/verl semantics, made safe.

`compute_score` returns 0 when no equation can be extracted, `format_score` when one is extracted
but uses the wrong numbers, fails to evaluate or misses the target, and `score` when it hits the
target within 1e-5. Every step follows TinyZero's `countdown.py` reward exactly (a transcription
in `tests/reference/countdown_eval.py` is the tests' oracle); the differences are only in cost:

* `extract_solution` finds the last `<answer>...</answer>` with `str.find`/`rfind` (linear, no
  Python loop over matches), where the lazy regex of the reference is quadratic on a line with
  many unclosed `<answer>` tags;
* `validate_equation` stops reading numbers once there are more than allowed (the answer is
  already False), so a megabyte of digits is rejected without converting each run to int;
* `evaluate_equation` never calls `eval`: see `safe_eval.safe_evaluate` for the one place
  (integers beyond a stated bound) where it refuses what `eval` would grind through; an equation
  with a non-ASCII character is None without parsing (`eval` fails on every one).

Every input up to 1 MB is scored in under 10 ms (`benchmarks/verifier_1mb.py` measures it).

The reference also printed a random 1-in-64 sample using the global `random` state; we do not,
because that silently changes every other consumer of that RNG.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from calibrl.protocol.completions import RESPONSE_MARKERS
from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN
from calibrl.tasks.countdown.safe_eval import safe_evaluate

_MARKERS_SHARED = "ssistant"
_NUMBER = re.compile(r"\d+")
TOLERANCE = 1e-5

# The reference's allowed characters are `^[\d+\-*/().\s]+$`. Byte-level fast paths for ASCII text,
# derived from regexes so they cannot drift: the ASCII characters that class accepts, and
# everything that is not a digit.
_ALLOWED_ASCII = bytes(i for i in range(128) if re.match(r"[\d+\-*/().\s]", chr(i)))
_NON_DIGITS_TO_SPACE = bytes(i if chr(i).isdigit() and i < 128 else 32 for i in range(256))


def _response_last_line(solution_str: str) -> str:
    # One scan for the substring both markers share: on a long string without either marker
    # (most of the hostile ones) it halves the time spent looking for them.
    if _MARKERS_SHARED in solution_str:
        for marker in RESPONSE_MARKERS:
            at = solution_str.find(marker)
            if at != -1:
                solution_str = solution_str[at + len(marker) :]
                break
    return solution_str.rpartition("\n")[2]


def _last_answer(line: str) -> str | None:
    """The group of the last match of `re.finditer(r"<answer>(.*?)</answer>", line)`, unstripped.

    Found from the end with str.find/rfind, where a Python loop over 60,000 matches costs tens of
    ms. The matches are leftmost and non-overlapping, each closed by the first "</answer>" after
    its opening tag, and the two tags cannot overlap each other. So the last "<answer>" before the
    last "</answer>" lies inside the last match, which therefore ends at the first "</answer>"
    after it, and opens at the first "<answer>" after the last "</answer>" before that tag.
    """
    last_close = line.rfind(ANSWER_CLOSE)
    inner_open = line.rfind(ANSWER_OPEN, 0, last_close) if last_close != -1 else -1
    if inner_open == -1:
        return None
    end = line.find(ANSWER_CLOSE, inner_open + len(ANSWER_OPEN))
    previous_close = line.rfind(ANSWER_CLOSE, 0, inner_open)
    search_from = 0 if previous_close == -1 else previous_close + len(ANSWER_CLOSE)
    start = line.find(ANSWER_OPEN, search_from) + len(ANSWER_OPEN)
    return line[start:end]


def extract_solution(solution_str: str) -> str | None:
    """The equation inside the last `<answer>...</answer>` on the last line of the response.

    If `"Assistant:"` occurs, the response is what follows its first occurrence; else the same
    for `"<|im_start|>assistant"`; else the whole string (the probe passes the answer alone).
    Only the text after the last `'\n'` is searched. Returns the stripped match, or None.
    """
    answer = _last_answer(_response_last_line(solution_str))
    return None if answer is None else answer.strip()


def validate_equation(equation_str: str, available_numbers: Iterable[Any]) -> bool:
    """Every `\\d+` run of the equation, as ints, sorted, equals the sorted available numbers.

    So each number is used exactly once, and `4.0` reads as the two numbers 4 and 0.
    """
    try:
        available = sorted(available_numbers)
        limit = len(available)
        if equation_str.isascii():
            # Digit runs = whitespace-separated words once every non-digit is a space; maxsplit
            # stops reading after one run too many.
            runs = equation_str.encode().translate(_NON_DIGITS_TO_SPACE).split(None, limit)
            if len(runs) > limit:
                return False
        else:
            runs = []
            for match in _NUMBER.finditer(equation_str):
                if len(runs) == limit:
                    return False  # one run too many: cannot match
                runs.append(match.group())
        return sorted(int(run) for run in runs) == available
    except Exception:  # the reference returns False on any error (e.g. a 5,000-digit run)
        return False


def evaluate_equation(equation_str: str) -> Any:
    """Python's value of the equation if it has only digits, `+-*/().` and whitespace, else None.

    No `eval`: the value is computed by `safe_evaluate`; errors (division by zero, overflow,
    syntax) give None, as in the reference.
    """
    try:
        if not equation_str.isascii():
            # `eval` fails on every one: outside string literals and comments (which need `'"#`),
            # Python's tokenizer takes a non-ASCII character only inside a name, and no name
            # starts with a Unicode digit or space (nor can a name evaluate under this filter).
            return None
        allowed = bool(equation_str) and not equation_str.encode().translate(None, _ALLOWED_ASCII)
    except (TypeError, AttributeError):
        return None
    return safe_evaluate(equation_str) if allowed else None


def compute_score(
    solution_str: str,
    ground_truth: Mapping[str, Any],
    method: str = "strict",
    format_score: float = 0.1,
    score: float = 1.0,
) -> float:
    """0 (no equation), `format_score` (wrong numbers / not evaluable / wrong value) or `score`.

    Args:
        solution_str: decoded prompt+response (training) or the answer alone (probe).
        ground_truth: `{"target": real number, "numbers": list | tuple | numpy array}`.
        method: only `"strict"`, the reference behaviour.
    """
    if method != "strict":
        raise ValueError(f"unknown method {method!r}; the Countdown reward supports 'strict'")
    target = ground_truth["target"]
    numbers = ground_truth["numbers"]

    equation = extract_solution(solution_str)
    if equation is None:
        return 0
    if not equation.isascii():
        # evaluate_equation is None for these, so the score is format_score whatever the numbers;
        # skipping validate_equation saves a Unicode regex scan (~20 ms per MB).
        return format_score
    if not validate_equation(equation, numbers):
        return format_score
    try:
        result = evaluate_equation(equation)
        if result is None:
            return format_score
        return score if abs(result - target) < TOLERANCE else format_score
    except Exception:  # e.g. an Ellipsis or tuple result, an int too large for a float target
        return format_score


def verify_equation_strict(solution_str: str, target_val: Any, allowed_nums: Any) -> bool:
    """The probe's check: `compute_score(...) == 1.0` with the reference defaults. Never raises."""
    try:
        ground_truth = {"target": target_val, "numbers": allowed_nums}
        return compute_score(solution_str, ground_truth, "strict", 0.1, 1.0) == 1.0
    except Exception:
        return False
