"""Evaluate an arithmetic expression with Python's semantics, without `eval` and without hangs.

Parsing uses Python's own parser (`ast.parse`), so what parses, what fails to parse and how
operators bind are exactly Python's. The tree is then walked iteratively (deep trees cannot blow
the interpreter stack) and each operator is applied with Python's own `operator` functions, so
values, int/float promotion, floor division and errors are Python's too.

What differs from `eval` is bounded cost, and only there. Two stated bounds:

* every integer value (literal or result) has at most `MAX_INT_BITS` bits;
* the bit lengths of the integer results of one expression sum to at most `MAX_TOTAL_BITS`.

An expression that stays inside both gets exactly `eval`'s value, however large its intermediates
(`1//64**(99*99)` builds a 58,807-bit power and is 0). One that leaves them is refused, and
cheaply: before an operation runs, a lower bound on its result size is compared with
`MAX_INT_BITS` (`2**99**99` is refused in microseconds); an operation whose result might fit is
run (it then costs at most one `MAX_INT_BITS`-sized operation) and its true size is checked.

Input size is bounded the same way, cheapest checks first: more than `MAX_NONSPACE_CHARS`
characters that are not blanks (space, tab, form feed, newline, carriage return) are refused
before parsing; with the handful of numbers a Countdown answer may contain, every such input that
`eval` can finish is thousands of redundant signs, brackets or empty tuples. Long runs of blanks are
shortened before parsing (Python's parser needs milliseconds per 100 kB), to a run the tokenizer
reads the same way: see `_shorten_blanks`.

Refusal means `None`, the same as any failure. Everything else returns exactly what `eval` would.
"""

from __future__ import annotations

import ast
import math
import operator
import re

MAX_INT_BITS = 1 << 16  # 65,536 bits (~19,700 digits): the largest op costs ~1 ms
MAX_TOTAL_BITS = 1 << 20  # per expression, summed over integer results
MAX_NONSPACE_CHARS = 10_000
# Python's compiler fails with RecursionError on some trees that `ast.parse` still accepts (from
# depth ~3,000 on); for trees deeper than this we let `compile` decide, exactly as `eval` would.
_COMPILE_CHECK_DEPTH = 1_000

# The characters Python's tokenizer skips between tokens (" \t\f") or reads as line ends.
_BLANKS = " \t\x0c\n\r"
_BLANK_BYTES = _BLANKS.encode()
_BLANK_RUN = re.compile(r"[ \t\x0c\n\r]{2,}")

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


def _result_bits_lower_bound(op: type, a: object, b: object) -> int:
    """A lower bound on the bit length of `a op b`, within 2 bits of it for `*` and `**`.

    0 when no big-int result can arise (floats, division, a power with result 0, 1 or -1).
    """
    if not (_is_int(a) and _is_int(b)) or a == 0 or b == 0:
        return 0
    abits = a.bit_length()
    if op is ast.Mult:
        return abits + b.bit_length() - 1
    if op is not ast.Pow or b < 0 or abs(a) <= 1:
        return 0
    if b.bit_length() > 53:  # b is far beyond any feasible exponent; |a|**b >= 2**((abits-1)*b)
        return (abits - 1) * b + 1
    # |a|**b has floor(b*log2|a|) + 1 bits; the margin absorbs the float's rounding (~1e-15).
    return math.floor(b * math.log2(abs(a)) * (1 - 1e-12)) + 1


def _apply_binop(op: type, a: object, b: object, budget: list[int]) -> object:
    fn = _BINOPS.get(op)
    if fn is None:
        raise _Refused(op.__name__)
    if _result_bits_lower_bound(op, a, b) > min(MAX_INT_BITS, budget[0]):
        raise _Refused("integer too large")  # refused before any big-int work
    if op is ast.Pow and _is_int(a) and _is_int(b) and b > 0 and abs(a) <= 1:
        # Same value as Python's pow, without its loop over the exponent's bits.
        return a if a != -1 else (1 if b % 2 == 0 else -1)
    # The bound is tight, so this costs at most one operation of about MAX_INT_BITS bits.
    result = fn(a, b)
    if _is_int(result):
        bits = result.bit_length()
        if bits > MAX_INT_BITS:
            raise _Refused("integer too large")
        budget[0] -= bits
        if budget[0] < 0:
            raise _Refused("expression too costly")
    return result


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


def _short_blank_run(match: re.Match[str]) -> str:
    run = match.group()
    last_line_start = max(run.rfind("\n"), run.rfind("\r")) + 1  # rfind: memory speed
    last_line = run[last_line_start:]
    # Only a line start's run can matter, and there only whether the column is 0 (a form feed
    # resets it) or not: any other column is an unexpected indent in an expression.
    indent = "" if not last_line else "\x0c" if last_line.endswith("\x0c") else " "
    return ("\n" if last_line_start else "") + indent


def _shorten_blanks(source: str) -> str:
    """`source` with each run of blanks cut to at most two characters that tokenize the same way.

    Between tokens Python's tokenizer skips spaces, tabs and form feeds alike; line ends inside a
    run only add blank lines, which it skips too.
    """
    return _BLANK_RUN.sub(_short_blank_run, source)


def _nonblank_chars(text: str) -> int:
    # Both run at memory speed; splitting a long input into words does not.
    if text.isascii():
        return len(text.encode().translate(None, _BLANK_BYTES))
    return len(text) - sum(text.count(blank) for blank in _BLANKS)


def safe_evaluate(expression: str) -> object | None:
    """Value of `expression` as Python's `eval` computes it, or None on any failure or refusal.

    `expression` is expected to be pre-filtered to digits, `+-*/().` and whitespace (the
    Countdown allowed-character rule), but any string is handled safely.
    """
    try:
        if len(expression) > MAX_NONSPACE_CHARS and (
            _nonblank_chars(expression) > MAX_NONSPACE_CHARS
        ):
            return None
        # builtin eval() strips leading spaces and tabs before compiling; ast.parse does not.
        source = expression.lstrip(" \t")
        if len(source) > MAX_NONSPACE_CHARS:
            source = _shorten_blanks(source)
        value, depth = _walk(ast.parse(source, mode="eval"))
        if depth > _COMPILE_CHECK_DEPTH:
            # From source, as eval does (compiling the tree object has lower limits).
            # This compiles only: nothing is executed.
            compile(source, "<equation>", "eval")
        return value
    except (_Refused, ArithmeticError, TypeError, ValueError, SyntaxError, MemoryError,
            RecursionError):
        return None
