"""Truncation points of a chain of thought, and where its tokens sit in the text.

A point keeps the first `cut` tokens of the chain; `x` in [0, 1] places it on the horizontal axis
of the probe's curves: the requested fraction, or `cut / n` for step boundaries. Point 0 keeps no
chain at all, point 1 the whole chain.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# A step ends at a line break, or at whitespace after sentence-final punctuation; a cut keeps
# the step's text but not that whitespace (the forced text brings its own line break).
_STEP_END = re.compile(r"(?:\n|(?<=[.!?])\s)\s*")


@dataclass(frozen=True)
class Point:
    x: float
    cut: int  # chain tokens kept


def fraction_points(n_tokens: int, fractions: Sequence[float]) -> list[Point]:
    """`cut = round(f * n)` (halves up) for each fraction `f`."""
    return [Point(float(f), min(n_tokens, math.floor(f * n_tokens + 0.5))) for f in fractions]


def token_texts(tokenizer: Any, token_ids: Sequence[int]) -> list[str]:
    """The text each token adds to the decoded sequence (special tokens included);
    `"".join(result) == tokenizer.decode(token_ids)` for byte-level tokenizers.

    Decoding a token alone can lose context (a leading space) or half a character (a multi-byte
    character split over tokens), so tokens are decoded incrementally, with the previous piece
    as left context, and a token that leaves a character unfinished adds "" and hands its bytes
    to the token that finishes it. Linear in the length.
    """
    ids = [int(t) for t in token_ids]

    def dec(part: list[int]) -> str:
        return tokenizer.decode(part, skip_special_tokens=False)

    out: list[str] = []
    prefix, read = 0, 0  # ids[prefix:read] is the context already emitted
    for i in range(len(ids)):
        before, after = dec(ids[prefix:read]), dec(ids[prefix:i + 1])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            out.append(after[len(before):])
            prefix, read = read, i + 1
        else:
            out.append("")
    if read < len(ids):  # a sequence that ends inside a character: its bytes go to the last token
        out[-1] += dec(ids[prefix:])[len(dec(ids[prefix:read])):]
    return out


def char_ends(texts: Sequence[str]) -> list[int]:
    """`ends[i]` = length of `"".join(texts[:i + 1])`."""
    ends, total = [], 0
    for t in texts:
        total += len(t)
        ends.append(total)
    return ends


def step_cuts(texts: Sequence[str]) -> list[int]:
    """Token counts that end a step of the chain whose tokens add `texts`: 0, every boundary
    (before the whitespace that ends a step) that follows some non-blank text, and
    `len(texts)`; sorted, distinct.

    A boundary inside a token (a token holding both a step's last word and the line break)
    falls before that token: a cut never splits a token.
    """
    text = "".join(texts)
    ends = char_ends(texts)
    cuts = {0, len(texts)}
    for match in _STEP_END.finditer(text):
        boundary = match.start()
        if not text[:boundary].strip():
            continue  # a leading line break ends no step
        cuts.add(sum(1 for e in ends if e <= boundary))
    return sorted(cuts)


def end_without_trailing_blanks(texts: Sequence[str], start: int, end: int) -> int:
    """The end of `texts[start:end]` without its trailing whitespace-only tokens."""
    while end > start and not texts[end - 1].strip():
        end -= 1
    return end


def step_points(texts: Sequence[str]) -> list[Point]:
    """One point per step boundary, at `x = cut / n` (a chain without tokens: x = 0 and 1)."""
    n = len(texts)
    if n == 0:
        return [Point(0.0, 0), Point(1.0, 0)]
    return [Point(cut / n, cut) for cut in step_cuts(texts)]
