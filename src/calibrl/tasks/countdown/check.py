"""The numbers check: which of the given numbers a Countdown answer uses, written as text.

A factual reading of the answer, not a verdict on it: it says nothing of the value, only
whether each number in the answer is one of the given ones (each usable once). The warm-up
teaches it as the turn-2 analysis (`Task.analysis`), so the stated confidence can follow an
examination of the answer that a small model can do by copying and looking up, unlike
recomputing the arithmetic (benchmarks/rl/README.md).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

_NUMBER = re.compile(r"\d+")
NO_ANSWER = "No answer"


def numbers_check(equation: str | None, numbers: Sequence[int]) -> str:
    """One line per number of `equation`, in order, then one per given number left unused.

    A number of the equation is `"N given"` when one of the given `numbers` equal to it is still
    unused, `"N again"` when all of those are already used, and `"N not given"` when none is
    equal; then each unused given number, in the given order, is `"M not used"`. The answer
    uses exactly the given numbers iff no line has "not" or "again". `NO_ANSWER` for None.

    >>> numbers_check("16 + 16", [16, 21])
    '16 given\\n16 again\\n21 not used'
    """
    if equation is None:
        return NO_ANSWER
    given = [int(n) for n in numbers]
    unused = Counter(given)
    lines = []
    for text in _NUMBER.findall(equation):
        value = int(text)
        if unused[value] > 0:
            unused[value] -= 1
            lines.append(f"{value} given")
        else:
            lines.append(f"{value} again" if value in unused else f"{value} not given")
    # the unused copies of a repeated number are its last ones (the first ones were taken)
    seen = Counter()
    for n in given:
        seen[n] += 1
        if seen[n] > Counter(given)[n] - unused[n]:
            lines.append(f"{n} not used")
    return "\n".join(lines) if lines else NO_ANSWER


def check_flags_wrong_numbers(check_text: str) -> bool:
    """Whether a `numbers_check` text (or a model's copy of one) says the numbers are wrong."""
    return bool(re.search(r"\b(not|again)\b", check_text)) or check_text.strip() == NO_ANSWER
