"""Finding a math answer in a response, and checking it with math-verify (imported lazily)."""

from __future__ import annotations

from typing import Any

from calibrl.errors import UserError
from calibrl.protocol.completions import last_answer

BOXED = "\\boxed"
MAX_ANSWER_CHARS = 1000  # a longer "answer" is wrong: never handed to the parser
MAX_EXPONENT = 10_000  # larger integer powers and factorials are not evaluated (see `too_costly`)
MAX_NODES = 2_000
MISSING_EXTRA = "the math task needs math-verify: pip install 'calibrl[math]'"


def last_boxed(text: str) -> str | None:
    """The stripped content of the last (by its start) brace-balanced `\\boxed{…}` in `text`,
    or None. Escaped braces (`\\{`, `\\}`) do not count; one linear pass, so hostile text
    (thousands of unclosed `\\boxed{`) costs no more than its length."""
    if not isinstance(text, str) or BOXED not in text:
        return None
    stack: list[int | None] = []  # per open brace: the content start of a \boxed, else None
    best: tuple[int, int] | None = None
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            if text.startswith(BOXED, i):
                j = i + len(BOXED)
                while j < n and text[j] == " ":
                    j += 1
                if j < n and text[j] == "{":
                    stack.append(j + 1)
                    i = j + 1
                    continue
            i += 2  # an escaped character (\{, \}, \\) or a command's first letter
            continue
        if ch == "{":
            stack.append(None)
        elif ch == "}" and stack:
            start = stack.pop()
            if start is not None and (best is None or start > best[0]):
                best = (start, i)
        i += 1
    return None if best is None else text[best[0]:best[1]].strip()


def extract_math_answer(text: str) -> str | None:
    """The last `<answer>` block's content, or when there is none the last `\\boxed{…}`'s; a
    boxed expression inside the answer block is unwrapped."""
    if not isinstance(text, str):
        return None
    answer = last_answer(text)
    if answer is None:
        return last_boxed(text)
    return last_boxed(answer) or answer


def load_math_verify() -> Any:
    """The `math_verify` module, or `UserError` (one line) when the extra is not installed."""
    try:
        import math_verify
    except ImportError:
        raise UserError(MISSING_EXTRA) from None
    return math_verify


def _as_latex(answer: str) -> str:
    body = answer.strip().strip("$").strip()
    return f"${body}$"


def equivalent(given: str, reference: str) -> bool:
    """math-verify's verdict that `given` equals `reference` (LaTeX or plain text each).

    math-verify's own timeouts are switched off: they use `signal.alarm`, which would cancel
    the limit `Task.verify` sets (`calibrl.utils.timeout`, same timer) and fails off the main
    thread; `Task.verify` bounds the call instead, and `MAX_ANSWER_CHARS` bounds the input.
    May raise: call it through `Task.verify`.
    """
    if not given or len(given) > MAX_ANSWER_CHARS:
        return False
    mv = load_math_verify()
    gold = mv.parse(_as_latex(reference), parsing_timeout=None)
    target = mv.parse(_as_latex(given), parsing_timeout=None)
    if not gold or not target or too_costly(target) or too_costly(gold):
        return False
    return bool(mv.verify(gold, target, timeout_seconds=None))


def _big_number(value: Any) -> bool:
    return bool(getattr(value, "is_Number", False)) and abs(value) > MAX_EXPONENT


def too_costly(parsed: list[Any]) -> bool:
    """Whether comparing a parsed answer could run for ever inside C code that no signal
    interrupts: sympy evaluates `10^{10^{10}}` or `(10^7)!` as one integer operation. True for
    an integer power or factorial beyond `MAX_EXPONENT`, a power tower of numbers, or an
    expression of more than `MAX_NODES` nodes; such an answer is treated as wrong."""
    from sympy import Basic, Pow, factorial, preorder_traversal

    nodes = 0
    for item in parsed:
        if not isinstance(item, Basic):
            continue
        for node in preorder_traversal(item):
            nodes += 1
            if nodes > MAX_NODES:
                return True
            if isinstance(node, Pow):
                exponent = node.exp
                if _big_number(exponent) or any(
                        isinstance(inner, Pow | factorial) and inner.is_number
                        for inner in preorder_traversal(exponent)):
                    return True
            elif isinstance(node, factorial) and node.args[0].is_number and (
                    not node.args[0].is_Number or _big_number(node.args[0])):
                return True
    return False
