"""Reading a free-form reply ("The capital of Peru is Lima.") as a short answer, by name.

A pretrained chat model answers factual questions in sentences and ignores the answer tags until
it is taught them. Two readings use the same matching, on SQuAD-normalised words with accents
folded (`normalize_answer`), whole words only:

- `names_accepted`: the lenient reading of a reply, whether it names an accepted answer (in its
  last answer block when it has one, else anywhere), so a model as it comes and the same model
  after a format warm-up are judged alike;
- `named_value`: which value of a vocabulary (e.g. every capital a training split asks about)
  a reply names, so the model's own replies can be rewritten into the answer tags: a format
  warm-up that teaches the tags and no fact, since the answer is the model's own;
  `named_prefix` cuts the reply after it, the sentence the model said it in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from calibrl.protocol.completions import last_answer
from calibrl.tasks.short_answer.normalize import normalize_answer

READ_CHARS = 1000


def _words(text: str) -> str:
    # Spaces around every word make a whole-word search a plain substring search.
    return f" {normalize_answer(text)} "


def names_accepted(reply: str, accepted: Iterable[str]) -> bool:
    """Whether `reply` names one of `accepted` as whole words: in its last answer block when it
    has one (a tagged reply is read as it asks), else anywhere in it. Never raises."""
    if not isinstance(reply, str):
        return False
    given = last_answer(reply)
    text = _words(reply if given is None else given)
    return any(words.strip() and words in text
               for words in (_words(a) for a in accepted if isinstance(a, str)))


class Vocabulary:
    """The values a reply may name, each an accepted spelling mapped to its canonical form (the
    first accepted answer of a value)."""

    def __init__(self, answer_lists: Iterable[Sequence[str]]) -> None:
        self.canonical: dict[str, str] = {}
        for answers in answer_lists:
            for spelling in answers:
                words = normalize_answer(spelling)
                if words:
                    self.canonical.setdefault(words, answers[0])
        # Longest first: "mexico city" is tried before "mexico".
        alternatives = sorted(self.canonical, key=len, reverse=True)
        self._pattern = (re.compile(r"(?<!\S)(" + "|".join(map(re.escape, alternatives))
                                    + r")(?!\S)") if alternatives else None)

    def __len__(self) -> int:
        return len(self.canonical)

    def named_value(self, reply: str) -> str | None:
        """The canonical value whose spelling the reply names last (an answer ends a sentence:
        "Osaka is a city in Japan" names Japan), the longest where two start together; None
        when it names none. Only the first `READ_CHARS` characters are read: a reply to a
        short question that runs longer is no answer to rewrite."""
        found = self._found(reply)
        return self.canonical[found[-1]] if found else None

    def named_prefix(self, reply: str) -> str | None:
        """The reply cut right after the last value it names ("The capital of Svalbard is
        Oslo, Norway." with capitals -> "The capital of Svalbard is Oslo"): the shortest
        prefix, ending at a word, that names every value the whole reply names, the same
        last; None when it names none."""
        found = self._found(reply)
        if not found:
            return None
        text = reply[:READ_CHARS]
        for match in re.finditer(r"\w+", text):
            prefix = text[:match.end()]
            named = self._found(prefix)
            if len(named) == len(found) and named[-1] == found[-1]:
                return prefix
        return text

    def _found(self, text: str) -> list[str]:
        if self._pattern is None or not isinstance(text, str):
            return []
        return [m.group(1) for m in self._pattern.finditer(normalize_answer(text[:READ_CHARS]))]


def vocabularies(answers_by_kind: Iterable[tuple[str, Sequence[str]]]) -> dict[str, Vocabulary]:
    """One `Vocabulary` per kind of question (e.g. a world fact's type), from `(kind, accepted
    answers)` pairs, one pair per question."""
    lists: dict[str, list[Sequence[str]]] = {}
    for kind, answers in answers_by_kind:
        lists.setdefault(kind, []).append(answers)
    return {kind: Vocabulary(answer_lists) for kind, answer_lists in lists.items()}
