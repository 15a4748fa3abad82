"""Countdown solver: an expression over `numbers` (each used exactly once) that equals `target`.

Arithmetic is exact (`fractions.Fraction`), so `6 / 4 * 2 = 3` is found and `1 / 3 * 3 = 1` is
never judged by floating point. The search runs twice: first allowing only steps whose result is
a non-negative integer (the traces later shown to a model read like school arithmetic), then any
step. A hit counts only if its expression also scores 1.0 with `compute_score`, which evaluates
in floats; if an exact hit fails that check the search goes on, so "solvable" means solvable
by an expression the reward accepts.

Method (meet in the middle over subsets of the numbers):

* `table(mask)` maps every value reachable from the numbers in `mask` (a bit set over their
  positions) to one expression for it, built from the tables of each split of `mask` into two
  parts. Only masks of up to `_TABLE_MAX` numbers get a table: beyond that the tables grow to
  tens of thousands of values.
* `find(mask, t)` yields expressions for `t` without a table for `mask`: for each split (A, B)
  and each value `a` of A, it inverts the operator (`a + b = t` needs `b = t - a`, ...) and looks
  the needed `b` up in B, recursively when B is too big for a table.

With 4 numbers that is a few hundred table entries (a few milliseconds); with 5 or 6 numbers it
stays well under a second (`benchmarks/solver.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

from calibrl.errors import UserError
from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN
from calibrl.tasks.countdown.reward import compute_score

MAX_NUMBERS = 6
# Tables up to 4 numbers keep every split of a 5- or 6-number problem one lookup away (see find).
_TABLE_MAX = 4
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}

# A value is an int whenever it is integral (ints hash and add far faster than Fractions, and
# hash(3) == hash(Fraction(3)), so tables answer lookups whichever kind the key is).
Value = int | Fraction


@dataclass(frozen=True)
class _Node:
    """An expression tree node: a leaf holds one of the numbers, an inner node `left op right`."""

    value: Value
    op: str | None = None
    left: _Node | None = None
    right: _Node | None = None


@dataclass(frozen=True)
class Solution:
    """A solved instance.

    Attributes:
        expression: e.g. `"3 * (12 + 5)"`; scores 1.0 with `compute_score`.
        steps: one string per operation in evaluation order, e.g. `("12 + 5 = 17", "3 * 17 = 51")`;
            a value that is not an integer is written `p/q`, bracketed as an operand.
        integer_steps: True if every step's result is a non-negative integer.
    """

    expression: str
    steps: tuple[str, ...]
    integer_steps: bool


def _format_value(x: Value) -> str:
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _format_operand(x: Value) -> str:
    # "6 / (1/4)" rather than "6 / 1/4", which reads as (6 / 1) / 4.
    text = _format_value(x)
    return text if text.isdigit() else f"({text})"


def _render(node: _Node) -> str:
    """The expression with only the brackets that Python's precedence needs to follow the tree."""
    if node.op is None:
        return _format_value(node.value)
    prec = _PRECEDENCE[node.op]
    left, right = _render(node.left), _render(node.right)
    if node.left.op is not None and _PRECEDENCE[node.left.op] < prec:
        left = f"({left})"
    # `a - (b + c)` needs them; `a + (b - c)` keeps them so the text reads like the steps.
    if node.right.op is not None and _PRECEDENCE[node.right.op] <= prec:
        right = f"({right})"
    return f"{left} {node.op} {right}"


def _steps(node: _Node) -> list[str]:
    if node.op is None:
        return []
    return [
        *_steps(node.left),
        *_steps(node.right),
        f"{_format_operand(node.left.value)} {node.op} {_format_operand(node.right.value)} = "
        f"{_format_value(node.value)}",
    ]


def _is_nice(x: Value) -> bool:
    return Fraction(x).denominator == 1 and x >= 0


def _all_steps_nice(node: _Node) -> bool:
    if node.op is None:
        return True
    return _is_nice(node.value) and _all_steps_nice(node.left) and _all_steps_nice(node.right)


def _int_div(a: Value, b: Value) -> int | None:
    """Exact division when the quotient is an integer (integer-only search)."""
    return a // b if b != 0 and a % b == 0 else None


def _fraction_div(a: Value, b: Value) -> Value | None:
    """Exact division, an int where the quotient is integral."""
    if b == 0:
        return None
    q = Fraction(a, b)
    return q.numerator if q.denominator == 1 else q


class _Search:
    """Tables and lookups for one `numbers` list under one rule for allowed step results.

    `integer_only`: every step's result must be a non-negative integer.
    """

    def __init__(self, numbers: Sequence[int], integer_only: bool) -> None:
        self.integer_only = integer_only
        self.numbers: list[Value] = list(numbers)
        self.div = _int_div if integer_only else _fraction_div
        self.tables: dict[int, dict[Value, _Node]] = {}

    def allowed(self, x: Value) -> bool:
        return x >= 0 if self.integer_only else True

    def table(self, mask: int) -> dict[Value, _Node]:
        """Every value reachable from the numbers in `mask`, each with one expression."""
        if mask in self.tables:
            return self.tables[mask]
        if mask & (mask - 1) == 0:  # one number: the leaf itself
            value = self.numbers[mask.bit_length() - 1]
            table = {value: _Node(value)}
        else:
            table = {}
            for part_a, part_b in _splits(mask):
                for a, node_a in self.table(part_a).items():
                    for b, node_b in self.table(part_b).items():
                        for op, a_left, value in _combinations(a, b, self.div):
                            if value not in table and self.allowed(value):
                                left, right = (node_a, node_b) if a_left else (node_b, node_a)
                                table[value] = _Node(value, op, left, right)
        self.tables[mask] = table
        return table

    def lookup(self, mask: int, needed: Value | None, nonzero: bool) -> Iterator[_Node]:
        """Nodes for `needed` from `mask`; `needed=None` means any value (nonzero if asked)."""
        if bin(mask).count("1") <= _TABLE_MAX:
            table = self.table(mask)
            if needed is None:
                yield from (node for v, node in table.items() if v != 0 or not nonzero)
            elif needed in table:
                yield table[needed]
        elif needed is not None:
            # "Any value" only arises as 0 * B or 0 / B for a target 0; the split that moves one
            # more number next to the 0 (0 * x) leaves a B within table size, so none is lost.
            yield from self.find(mask, needed)

    def find(self, mask: int, target: Value) -> Iterator[_Node]:
        """Expressions over exactly the numbers in `mask` (two or more) that equal `target`."""
        if not self.allowed(target):
            return  # the last step's result is the target itself
        for part_a, part_b in _splits(mask):
            for a, node_a in self.table(part_a).items():
                for op, a_left, needed, nonzero in _inverses(a, target, self.div):
                    for node_b in self.lookup(part_b, needed, nonzero):
                        left, right = (node_a, node_b) if a_left else (node_b, node_a)
                        yield _Node(target, op, left, right)


def _splits(mask: int) -> Iterator[tuple[int, int]]:
    """Unordered splits of `mask` into two non-empty parts, smaller part first (A, B)."""
    bits = [1 << i for i in range(mask.bit_length()) if mask >> i & 1]
    for size in range(1, len(bits) // 2 + 1):
        for chosen in combinations(bits, size):
            part_a = sum(chosen)
            if 2 * size == len(bits) and not part_a & bits[0]:
                continue  # equal halves: count each split once
            yield part_a, mask ^ part_a


def _combinations(a: Value, b: Value, div: Callable) -> Iterator[tuple[str, bool, Value]]:
    """(op, a_is_left, value) for each way to combine a and b; `div` returns None if not allowed."""
    yield "+", True, a + b
    yield "*", True, a * b
    yield "-", True, a - b
    yield "-", False, b - a
    if (q := div(a, b)) is not None:
        yield "/", True, q
    if (q := div(b, a)) is not None:
        yield "/", False, q


def _inverses(a: Value, t: Value, div: Callable) -> Iterator[tuple[str, bool, Value | None, bool]]:
    """(op, a_is_left, needed, nonzero): `a op b == t` (or `b op a == t`) iff `b == needed`.

    `needed=None` means any b works (any nonzero b if `nonzero`): `0 * b == 0`, `0 / b == 0`.
    """
    yield "+", True, t - a, False
    yield "-", True, a - t, False
    yield "-", False, a + t, False
    if a == 0:
        if t == 0:
            yield "*", True, None, False
            yield "/", True, None, True
        return  # b / 0 is undefined, and 0 * b or 0 / b is never a nonzero t
    if (b := div(t, a)) is not None:
        yield "*", True, b, False
    if t != 0 and (b := div(a, t)) is not None:
        yield "/", True, b, True
    yield "/", False, t * a, False


def _check_input(numbers: Sequence[int], target: int) -> None:
    if not 1 <= len(numbers) <= MAX_NUMBERS:
        raise UserError(f"countdown needs 1 to {MAX_NUMBERS} numbers, got {len(numbers)}")
    for x in (*numbers, target):
        if type(x) is not int:
            raise UserError(f"countdown numbers and target must be ints, got {x!r}")
    if any(n < 0 for n in numbers):
        # compute_score reads digit runs without signs, so a negative number can never score.
        raise UserError(f"countdown numbers must be non-negative, got {list(numbers)}")


def _first_scoring(nodes: Iterator[_Node], numbers: Sequence[int], target: int) -> _Node | None:
    ground_truth = {"target": target, "numbers": list(numbers)}
    for node in nodes:
        if compute_score(f"{ANSWER_OPEN}{_render(node)}{ANSWER_CLOSE}", ground_truth) == 1.0:
            return node
    return None


def solve(numbers: Sequence[int], target: int) -> Solution | None:
    """An expression using each of `numbers` once that equals `target`, or None if none exists.

    Prefers expressions whose every step gives a non-negative integer. Deterministic.
    Raises `UserError` for more than `MAX_NUMBERS` numbers, negative numbers or non-int input.
    """
    numbers = list(numbers)
    _check_input(numbers, target)
    full = (1 << len(numbers)) - 1
    for integer_only in (True, False):
        search = _Search(numbers, integer_only)
        # One number has no split: its table (the leaf) is the only candidate.
        candidates = (
            search.find(full, target) if len(numbers) > 1 else search.lookup(full, target, False)
        )
        node = _first_scoring(candidates, numbers, target)
        if node is not None:
            return Solution(_render(node), tuple(_steps(node)), _all_steps_nice(node))
    return None


def is_solvable(numbers: Sequence[int], target: int) -> bool:
    """True iff `solve(numbers, target)` finds an expression."""
    return solve(numbers, target) is not None
