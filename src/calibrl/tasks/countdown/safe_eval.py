"""Evaluate an arithmetic expression with Python's semantics, without `eval` and without hangs.

Parsing uses Python's own parser (`ast.parse`), so what parses, what fails to parse and how
operators bind are exactly Python's. The tree is then walked iteratively (deep trees cannot blow
the interpreter stack) and each operator is applied with Python's own `operator` functions, so
values, int/float promotion, floor division and errors are Python's too.

What differs from `eval` is bounded cost, and only there:

* an integer result (or operand of `*` / `**`) may have at most `MAX_INT_BITS` bits; a result that
  would be larger (`2**99**99`, `99**98**97`) is refused in microseconds *before* it is computed;
* the sum of integer result sizes over one expression is capped at `MAX_TOTAL_BITS`, so a long
  expression cannot chain many near-limit operations;
* expressions with more than `MAX_NONSPACE_CHARS` non-whitespace characters are refused before
  parsing: Python's parser alone needs tens of milliseconds or more for such inputs, and with the
  handful of numbers a Countdown answer may contain, every one that `eval` can finish is a run of
  thousands of redundant signs, brackets or empty tuples.

Refusal means `None`, the same as any failure. Everything else returns exactly what `eval` would.
"""

from __future__ import annotations

import ast
import operator

MAX_INT_BITS = 1 << 16  # 65,536 bits (~19,700 digits): the largest op costs ~1 ms
MAX_TOTAL_BITS = 1 << 20  # per expression, summed over integer results
MAX_NONSPACE_CHARS = 10_000
# Python's compiler fails with RecursionError on some trees that `ast.parse` still accepts (from
# depth ~3,000 on); for trees deeper than this we let `compile` decide, exactly as `eval` would.
_COMPILE_CHECK_DEPTH = 1_000

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}
_UNARYOPS = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class _Refused(Exception):
    """The expression is outside what we evaluate (unsupported node or over a cost limit)."""


def _is_int(x: object) -> bool:
    return type(x) is int  # bool cannot occur: the grammar has no names


def _estimated_bits(op: type, a: object, b: object) -> int:
    """Upper bound on the bit length of an int result, 0 when no big-int work is involved."""
    if not (_is_int(a) and _is_int(b)):
        return 0
    abits, bbits = a.bit_length(), b.bit_length()
    if op is ast.Mult:
        return abits + bbits
    if op is ast.Pow:
        if b < 0 or abs(a) <= 1:
            return 1  # float result, or 0/1/-1 to any power: no big-int work
        # |a|**b < 2**(abits*b); compare without forming a huge product.
        return abits * b if bbits <= 64 else MAX_INT_BITS + 1
    return max(abits, bbits) + 1


def _apply_binop(op: type, a: object, b: object, budget: list[int]) -> object:
    fn = _BINOPS.get(op)
    if fn is None:
        raise _Refused(op.__name__)
    bits = _estimated_bits(op, a, b)
    if bits > MAX_INT_BITS:
        raise _Refused("integer too large")
    if op is ast.Pow and _is_int(a) and _is_int(b) and b > 0 and abs(a) <= 1:
        # Same value as Python's pow, without its loop over the exponent's bits.
        return a if a != -1 else (1 if b % 2 == 0 else -1)
    budget[0] -= bits
    if budget[0] < 0:
        raise _Refused("expression too costly")
    return fn(a, b)


def _constant(node: ast.Constant) -> object:
    value = node.value
    if type(value) in (int, float) or value is Ellipsis:
        if _is_int(value) and value.bit_length() > MAX_INT_BITS:
            raise _Refused("integer literal too large")
        return value
    raise _Refused(type(value).__name__)


def _walk(root: ast.AST) -> tuple[object, int]:
    """Post-order evaluation with an explicit stack (no recursion); returns (value, max stack)."""
    budget = [MAX_TOTAL_BITS]
    values: list[object] = []
    stack: list[tuple[ast.AST, bool]] = [(root, False)]
    depth = 0
    while stack:
        depth = max(depth, len(stack))
        node, children_done = stack.pop()
        if isinstance(node, ast.Expression):
            stack.append((node.body, False))
        elif isinstance(node, ast.Constant):
            values.append(_constant(node))
        elif isinstance(node, ast.Tuple) and not node.elts:
            values.append(())
        elif isinstance(node, ast.BinOp):
            if children_done:
                b, a = values.pop(), values.pop()
                values.append(_apply_binop(type(node.op), a, b, budget))
            else:
                stack += [(node, True), (node.right, False), (node.left, False)]
        elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARYOPS:
            if children_done:
                values.append(_UNARYOPS[type(node.op)](values.pop()))
            else:
                stack += [(node, True), (node.operand, False)]
        else:
            # Calls, starred items, ...: `eval` raises on every one of these for our grammar.
            raise _Refused(type(node).__name__)
    (result,) = values
    return result, depth


def safe_evaluate(expression: str) -> object | None:
    """Value of `expression` as Python's `eval` computes it, or None on any failure or refusal.

    `expression` is expected to be pre-filtered to digits, `+-*/().` and whitespace (the
    Countdown allowed-character rule), but any string is handled safely.
    """
    try:
        if len(expression) > MAX_NONSPACE_CHARS and (
            sum(map(len, expression.split())) > MAX_NONSPACE_CHARS
        ):
            return None
        # builtin eval() strips leading spaces and tabs before compiling; ast.parse does not.
        source = expression.lstrip(" \t")
        value, depth = _walk(ast.parse(source, mode="eval"))
        if depth > _COMPILE_CHECK_DEPTH:
            # From source, as eval does (compiling the tree object has lower limits).
            # This compiles only: nothing is executed.
            compile(source, "<equation>", "eval")
        return value
    except (_Refused, ArithmeticError, TypeError, ValueError, SyntaxError, MemoryError,
            RecursionError):
        return None
