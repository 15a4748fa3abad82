"""Lettered choices: the letters, reading which choice an answer names, and the seeded shuffle.

Pure functions; `calibrl.tasks.multiple_choice.task` and `.data` build on them.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Sequence

LETTERS = string.ascii_uppercase
MAX_CHOICES = len(LETTERS)

# "B", "b", "(B)", "B)", "(B", "B.", "B:", "(B)." — one letter, however bracketed or ended.
_LETTER = re.compile(r"\(?([A-Za-z])\)?[.:]?")
# "B) Paris", "(B) Paris", "B. Paris", "B: Paris" — a letter with a separator, then text.
_LETTER_AND_TEXT = re.compile(r"\(?([A-Za-z])(?:\)[.:]?|[.:])\s*(.+)", re.DOTALL)


def letter(index: int) -> str:
    """The letter of the choice at 0-based `index`: 0 -> "A"."""
    return LETTERS[index]


def choice_key(text: str) -> str:
    """What tells two choice texts apart: case and spacing do not."""
    return " ".join(text.casefold().split())


def parse_choice(answer: str | None, choices: Sequence[str]) -> int | None:
    """The 0-based index of the choice `answer` names, or None if it names none.

    An answer names a choice by its letter alone (`"B"`, `"(B)"`, `"B)"`, `"b"`), by the
    choice's full text (up to case and spacing), or by both (`"B) Paris"`, which must agree).
    A lone letter is read as a letter even when some choice's text is that letter; a letter
    past the last choice names none. Linear in the answer's length, whatever it holds.
    """
    if answer is None:
        return None
    text = answer.strip()
    match = _LETTER.fullmatch(text)
    if match:
        index = LETTERS.index(match[1].upper())
        return index if index < len(choices) else None
    key = choice_key(text)
    named = [i for i, choice in enumerate(choices) if choice_key(choice) == key]
    if named:
        return named[0] if len(named) == 1 else None  # repeated texts: ambiguous
    match = _LETTER_AND_TEXT.fullmatch(text)
    if match:
        index = LETTERS.index(match[1].upper())
        if index < len(choices) and choice_key(match[2]) == choice_key(choices[index]):
            return index
    return None


def _draw(seed: int, key: str, step: int, bound: int) -> int:
    # 64 bits of SHA-256 per draw: the same on every platform and Python version (`random`
    # promises that only for `random()`), and the modulo's bias below 2**-50 for 26 choices.
    digest = hashlib.sha256(f"{seed}\x1f{key}\x1f{step}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % bound


def shuffled_order(n: int, seed: int, key: str) -> list[int]:
    """A permutation of `range(n)` fixed by `seed` and `key` (a row's own text, so a row keeps
    its order wherever it sits in a file): Fisher-Yates with hash draws.

    `[original[i] for i in shuffled_order(...)]` is the shown order.
    """
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        j = _draw(seed, key, i, i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def shuffle_choices(choices: Sequence[str], correct: int, seed: int, key: str
                    ) -> tuple[list[str], int]:
    """`(choices in shuffled order, where the correct one went)` (`shuffled_order`)."""
    order = shuffled_order(len(choices), seed, key)
    return [choices[i] for i in order], order.index(correct)
