"""SQuAD's answer normalisation and its two scores, exact match and token F1, as pure functions.

The convention of the SQuAD v1.1 evaluation script, which HotpotQA, TriviaQA and the calibration
papers that train on them (RLCR) report: lower case, drop ASCII punctuation, drop the articles
"a", "an" and "the" as whole words, collapse whitespace. Exact match compares the normalised
strings; token F1 is the F1 of the bags (multisets) of normalised words. Both take the best over
the accepted answers (a question's aliases).

Three departures. Two are about empty text, so that saying nothing is never right: an answer
that normalises to nothing ("", "the", "?!") matches nothing (SQuAD would call "" equal to an
accepted "The"), and its F1 is 0, as in SQuAD v1.1 (v2.0 scores an empty pair 1). The third folds
accents, so that "Brasilia" is "Brasília": text that is not ASCII is decomposed (Unicode NFKD,
which also turns ligatures and full-width letters into plain ones) and its combining marks and
punctuation (of the Basic Multilingual Plane: "’", "«", "¿") are dropped; letters that do not
decompose ("ø", "ł", "ß") stay. SQuAD keeps accents, so "Brasilia" would be wrong there; ASCII
text normalises exactly as SQuAD's does.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Iterable

# str.translate deletes in one C pass, so a megabyte of model output normalises in milliseconds.
_DROP_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


@functools.cache
def _drop_marks_and_punctuation() -> dict[int, None]:
    """A `str.translate` table deleting every combining mark (Mn) and punctuation mark (P*) of
    the Basic Multilingual Plane: built on the first text that is not ASCII (some 10 ms), so
    importing this module stays free."""
    categories = ((code, unicodedata.category(chr(code))) for code in range(0x80, 0x10000))
    return {code: None for code, category in categories
            if category == "Mn" or category.startswith("P")}


def fold_accents(text: str) -> str:
    """`text` decomposed (NFKD) without its combining marks and non-ASCII punctuation:
    `"Brasília"` -> `"Brasilia"`, `"Xi’an"` -> `"Xian"`; ASCII text is returned as it is."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKD", text).translate(_drop_marks_and_punctuation())


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation with accents folded: lower case, no accents, no punctuation, no
    articles, single spaces.

    `"The  Denver Broncos!"` -> `"denver broncos"`, `"Brasília"` -> `"brasilia"`. Punctuation
    goes before articles, as in SQuAD, so `"the-end"` -> `"theend"` keeps its letters. Lower
    case comes both before folding ("İ" lowers to "i" and a mark) and after it (a decomposed
    "ℌ" is "H"), so normalising twice changes nothing.
    """
    text = fold_accents(text.lower()).lower().translate(_DROP_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, accepted: Iterable[str]) -> bool:
    """True iff `prediction` normalises to the same non-empty text as one accepted answer."""
    given = normalize_answer(prediction)
    return bool(given) and any(given == normalize_answer(answer) for answer in accepted)


def _f1(prediction_tokens: list[str], truth_tokens: list[str]) -> float:
    common = sum((Counter(prediction_tokens) & Counter(truth_tokens)).values())
    if common == 0:  # also when either side is empty
        return 0.0
    precision = common / len(prediction_tokens)
    recall = common / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, truth: str) -> float:
    """SQuAD's token F1 of one prediction against one answer: the harmonic mean of the shares
    of predicted and of true words (normalised, counted with repeats) that the two share.

    `token_f1("Denver", "the Denver Broncos")` = 2/3 (precision 1, recall 1/2).
    """
    return _f1(normalize_answer(prediction).split(), normalize_answer(truth).split())


def max_token_f1(prediction: str, accepted: Iterable[str]) -> float:
    """The best `token_f1` of `prediction` over the accepted answers (0.0 if there are none)."""
    tokens = normalize_answer(prediction).split()  # once: the prediction may be long
    return max((_f1(tokens, normalize_answer(answer).split()) for answer in accepted),
               default=0.0)
