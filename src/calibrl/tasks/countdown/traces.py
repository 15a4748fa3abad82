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
