"""Countdown traces for the supervised warm-up: the reference trace of a solved problem, and
wrong traces (a slightly corrupted equation whose steps are recomputed from it).

`trace_steps` writes one `"a op b = v"` line per operation, the same shape as the solver's steps,
so a wrong trace looks like a right one whose arithmetic went astray.
"""

from __future__ import annotations

import ast
import operator
import random
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from calibrl.protocol.completions import answer_trace
from calibrl.protocol.tags import THINK_OPEN
from calibrl.tasks.countdown.reward import verify_equation_strict

_OPS = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
}


def _value_text(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _operand_text(x: Fraction) -> str:
    text = _value_text(x)
    return text if x.denominator == 1 and x >= 0 else f"({text})"


def trace_steps(equation: str) -> list[str] | None:
    """One `"a op b = v"` line per operation of `equation`, in evaluation order (exact values).

    The same shape as the solver's steps; None if the equation does not parse as + - * / over
    integers or divides by zero.
    """
    try:
        tree = ast.parse(equation, mode="eval").body
    except SyntaxError:
        return None
    steps: list[str] = []

    def walk(node: ast.AST) -> Fraction:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return Fraction(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            symbol, apply = _OPS[type(node.op)]
            left, right = walk(node.left), walk(node.right)
            value = apply(left, right)  # Fraction: exact, ZeroDivisionError on / 0
            steps.append(f"{_operand_text(left)} {symbol} {_operand_text(right)} = "
                         f"{_value_text(value)}")
            return value
        raise ValueError(f"unsupported node {type(node).__name__}")

    try:
        walk(tree)
    except (ZeroDivisionError, ValueError):
        return None
    return steps


def _mutate(equation: str, numbers: Sequence[int], rng: random.Random) -> str | None:
    """`equation` with one operator or one number changed at random, or None if it cannot be."""
    tree = ast.parse(equation, mode="eval")
    ops = [n for n in ast.walk(tree) if isinstance(n, ast.BinOp)]
    leaves = [n for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    if ops and rng.random() < 0.5:
        node = rng.choice(ops)
        node.op = rng.choice([op for op in _OPS if op is not type(node.op)])()
    elif leaves:
        leaf = rng.choice(leaves)
        # Reusing another given number or missing by a little: the slips a model makes.
        others = [n for n in numbers if n != leaf.value]
        if others and rng.random() < 0.5:
            leaf.value = rng.choice(others)
        else:
            leaf.value = max(0, leaf.value + rng.choice((-2, -1, 1, 2)))
    else:
        return None
    return ast.unparse(tree)


def wrong_trace(equation: str, ground_truth: Mapping[str, Any], rng: random.Random,
                attempts: int = 20) -> str | None:
    """A turn-1 trace whose equation is `equation` slightly corrupted and fails the verifier.

    Its steps are recomputed from the corrupted equation, so the think block and the answer
    agree and the last step shows the wrong value. None if no attempt fails verification.
    """
    for _ in range(attempts):
        candidate = _mutate(equation, ground_truth["numbers"], rng)
        if candidate is None:
            return None
        steps = trace_steps(candidate)
        if steps is None:
            continue
        text = answer_trace(steps, candidate)
        if not verify_equation_strict(text, ground_truth["target"], ground_truth["numbers"]):
            return text
    return None


def reference_trace(extra: Mapping[str, Any]) -> str | None:
    """The correct trace from a problem's `extra` (`"solution"` and `"steps"` of the solver),
    or None if it has no reference solution."""
    solution, steps = extra.get("solution"), extra.get("steps")
    if not solution or steps is None:
        return None
    return answer_trace(list(steps), solution)


# --- search traces: failed attempts before the solution ----------------------------------------

def _int_results(a: int, b: int) -> list[tuple[str, int]]:
    """The steps `a op b` whose result is a non-negative integer, as (op, value)."""
    out = [("+", a + b), ("*", a * b)]
    if a >= b:
        out.append(("-", a - b))
    if b and a % b == 0:
        out.append(("/", a // b))
    return out


def _bracketed(expression: str) -> str:
    return expression if expression.isdigit() else f"({expression})"


def failed_attempt(numbers: Sequence[int], target: int, rng: random.Random
                   ) -> tuple[list[str], str] | None:
    """A random way through `numbers` that misses `target`: (step lines, its expression).

    Every step but the last combines a random pair by a random operator with a non-negative
    integer result (the larger operand first); the last step takes the operator whose result
    is closest to the target, as a solver would, so an attempt only fails where its first
    choices made the target unreachable. None if this draw hit the target (or a 2-number
    problem, whose one step always picks the closest value, cannot fail this way).
    """
    items = [(int(n), str(int(n))) for n in numbers]  # (value, expression)
    steps: list[str] = []
    while len(items) > 1:
        i, j = rng.sample(range(len(items)), 2)
        (a, ea), (b, eb) = sorted((items[i], items[j]), key=lambda item: -item[0])
        options = _int_results(a, b)
        if len(items) == 2:
            op, value = min(options, key=lambda o: (abs(o[1] - target), "+-*/".index(o[0])))
        else:
            op, value = rng.choice(options)
        steps.append(f"{a} {op} {b} = {value}")
        rest = [item for k, item in enumerate(items) if k not in (i, j)]
        items = rest + [(value, f"{_bracketed(ea)} {op} {_bracketed(eb)}")]
    if items[0][0] == target:
        return None
    return steps, items[0][1]


def failed_attempts(numbers: Sequence[int], target: int, count: int, rng: random.Random,
                    tries: int = 20) -> list[tuple[list[str], str]]:
    """Up to `count` distinct failed attempts (`failed_attempt`); fewer when `tries` draws
    find no more."""
    found: list[tuple[list[str], str]] = []
    for _ in range(tries):
        if len(found) >= count:
            break
        attempt = failed_attempt(numbers, target, rng)
        if attempt is not None and attempt not in found:
            found.append(attempt)
    return found


def with_failed_attempts(trace: str, ground_truth: Mapping[str, Any], failed: int,
                         rng: random.Random) -> str:
    """`trace` with up to `failed` failed attempts (`failed_attempt`) written at the start of
    its think block, one step per line: what a model that checks its last step against the
    target and tries again looks like before its final attempt."""
    head = f"{THINK_OPEN}\n"
    if failed <= 0 or not trace.startswith(head):
        return trace
    tried = failed_attempts(ground_truth["numbers"], int(ground_truth["target"]), failed, rng)
    lines = "".join(line + "\n" for attempt, _ in tried for line in attempt)
    return head + lines + trace[len(head):]
