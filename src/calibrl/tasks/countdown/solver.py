"""Countdown solver: an expression over `numbers` (each used exactly once) that equals `target`.

Arithmetic is exact (`fractions.Fraction`), so `6 / 4 * 2 = 3` is found and `1 / 3 * 3 = 1` is
never judged by floating point. The search runs twice: first allowing only steps whose result is
a non-negative integer (the traces later shown to a model read like school arithmetic), then any
step. A hit counts only if its expression also scores 1.0 with `compute_score`, which evaluates
in floats; if an exact hit fails that check the search goes on.

Method (meet in the middle over subsets of the numbers):

* `_table(mask)` maps every value reachable from the numbers in `mask` to one expression for it,
  built from the tables of each split of `mask` into two parts. Only masks of up to `_TABLE_MAX`
  numbers get a table: beyond that the tables grow to tens of thousands of values.
* `_find(mask, t)` yields expressions for `t` without a table for `mask`: for each split (A, B)
  and each value `a` of A, it inverts the operator (`a + b = t` needs `b = t - a`, ...) and looks
  the needed `b` up in B, recursively when B is too big for a table.

With 4 numbers that is a few hundred table entries (about a millisecond); with 6 numbers and no
solution it is well under a second.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

from calibrl.errors import UserError
from calibrl.tasks.countdown.reward import compute_score

MAX_NUMBERS = 6
# Tables up to 4 numbers keep every split of a 5- or 6-number problem one lookup away (see _find).
_TABLE_MAX = 4
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


@dataclass(frozen=True)
class _Node:
    """An expression tree node: a leaf holds `numbers[index]`, an inner node `left op right`."""

    value: Fraction
    op: str | None = None
    left: _Node | None = None
    right: _Node | None = None


@dataclass(frozen=True)
class Solution:
    """A solved instance.

    Attributes:
        expression: e.g. `"(12 + 5) * 3"`; scores 1.0 with `compute_score`.
        steps: one string per operation in evaluation order, e.g. `("12 + 5 = 17", "17 * 3 = 51")`;
            values that are not integers are written as `p/q`.
        integer_steps: True if every step's result is a non-negative integer.
    """

    expression: str
    steps: tuple[str, ...]
    integer_steps: bool


def _format_value(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


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
        f"{_format_value(node.left.value)} {node.op} {_format_value(node.right.value)} = "
        f"{_format_value(node.value)}",
    ]


def _is_nice(x: Fraction) -> bool:
    return x.denominator == 1 and x >= 0


def _all_steps_nice(node: _Node) -> bool:
    if node.op is None:
        return True
    return _is_nice(node.value) and _all_steps_nice(node.left) and _all_steps_nice(node.right)


class _Search:
    """Tables and lookups for one `numbers` list under one rule for allowed step results."""

    def __init__(self, numbers: Sequence[int], integer_only: bool) -> None:
        self.numbers = [Fraction(n) for n in numbers]
        self.integer_only = integer_only
        self.tables: dict[int, dict[Fraction, _Node]] = {}

    def _allowed(self, x: Fraction) -> bool:
        return _is_nice(x) if self.integer_only else True

    def _table(self, mask: int) -> dict[Fraction, _Node]:
        if mask in self.tables:
            return self.tables[mask]
        if mask & (mask - 1) == 0:  # one number: the leaf itself, whatever its value
            value = self.numbers[mask.bit_length() - 1]
            table = {value: _Node(value)}
        else:
            table = {}
            for part_a, part_b in _splits(mask):
                for a, node_a in self._table(part_a).items():
                    for b, node_b in self._table(part_b).items():
                        for op, a_left, value in _combinations(a, b):
                            if value not in table and self._allowed(value):
                                left, right = (node_a, node_b) if a_left else (node_b, node_a)
                                table[value] = _Node(value, op, left, right)
        self.tables[mask] = table
        return table

    def lookup(self, mask: int, needed: Fraction | None, nonzero: bool) -> Iterator[_Node]:
        """Nodes for `needed` from `mask`; `needed=None` means any value (nonzero if asked)."""
        if bin(mask).count("1") <= _TABLE_MAX:
            table = self._table(mask)
            if needed is None:
                yield from (n for v, n in table.items() if v != 0 or not nonzero)
            elif needed in table:  # tables hold allowed values only
                yield table[needed]
        elif needed is not None:
            # "Any value" only arises as 0 * B or 0 / B for a target 0; a split that moves one
            # more number next to the 0 (0 * x) leaves a B within table size, so none is lost.
            yield from self.find(mask, needed)

    def find(self, mask: int, target: Fraction) -> Iterator[_Node]:
        """Every expression over exactly the numbers in `mask` found to equal `target`."""
        if not self._allowed(target):
            return  # the last step's result is the target itself
        for part_a, part_b in _splits(mask):
            for a, node_a in self._table(part_a).items():
                for op, a_left, needed, nonzero in _inverses(a, target):
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


def _combinations(a: Fraction, b: Fraction) -> Iterator[tuple[str, bool, Fraction]]:
    """(op, a_is_left, value) for each way to combine a and b."""
    yield "+", True, a + b
    yield "*", True, a * b
    yield "-", True, a - b
    yield "-", False, b - a
    if b != 0:
        yield "/", True, a / b
    if a != 0:
        yield "/", False, b / a


def _inverses(a: Fraction, t: Fraction) -> Iterator[tuple[str, bool, Fraction | None, bool]]:
    """(op, a_is_left, needed_b, b_must_be_nonzero): `a op b == t` or `b op a == t` iff b == needed.

    `needed_b=None` means any b (nonzero if flagged) works.
    """
    yield "+", True, t - a, False
    if a != 0:
        yield "*", True, t / a, False
    elif t == 0:
        yield "*", True, None, False
    yield "-", True, a - t, False
    yield "-", False, a + t, False
    if t != 0:
        if a != 0:
            yield "/", True, a / t, True
    elif a == 0:
        yield "/", True, None, True
    if a != 0:
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
        if compute_score(f"<answer>{_render(node)}</answer>", ground_truth) == 1.0:
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
            search.find(full, Fraction(target))
            if len(numbers) > 1
            else search.lookup(full, Fraction(target), nonzero=False)
        )
        node = _first_scoring(candidates, numbers, target)
        if node is not None:
            return Solution(_render(node), tuple(_steps(node)), _all_steps_nice(node))
    return None


def is_solvable(numbers: Sequence[int], target: int) -> bool:
    """True iff `solve(numbers, target)` finds an expression."""
    return solve(numbers, target) is not None
