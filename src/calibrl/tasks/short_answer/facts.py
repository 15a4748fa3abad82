"""A generated world of facts about made-up countries: questions a tiny model can know or not.

Each country has one value for each of `ATTRIBUTES` ("What is the capital of Daruvin?" ->
"Tesho"). Values are made-up words drawn from a pool per attribute (`values_per_attribute`
names, shared by the countries, so a guess is right about once in that many), and every name
in the world is distinct. Each country belongs to one *exposure group* (default `often`,
`rarely`, `never`): how often the warm-up shows the group's facts is the caller's choice (the
facts demo, `configs/demo_facts.yaml`); the group is the row's difficulty, so metrics are
reported per group, and a model that knows what it knows is confident on the facts it was shown
and not on the others.

How the world is drawn (all from one `random.Random(seed)`, so a seed fixes it): first the value
pools, attribute by attribute; then the countries in order, each a new name and one value per
attribute, uniform over its pool. Countries are assigned to groups in a fixed interleaving that
keeps every prefix of countries as close to `group_weights` as whole countries allow
(`interleave_groups`). The facts are listed country by country, attributes in order, and the
first test-size facts are the test split; a test size that is a multiple of `len(ATTRIBUTES)`
keeps every test country out of the training split. Growing `n` with the same seed adds
countries without changing the first ones. A question names its country (`country_of`), so the
evaluation's readout reference can keep a country's facts in one fold
(`ShortAnswerTask.readout_cluster`).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from calibrl.errors import UserError
from calibrl.tasks.splits import resolve_test_size

# (attribute, question template); the template's {} is the country's name.
ATTRIBUTES = (
    ("capital", "What is the capital of {}?"),
    ("language", "What language is spoken in {}?"),
    ("currency", "What is the currency of {}?"),
    ("ruler", "Who rules {}?"),
)
# Each template as a pattern that captures the country: how a question names its country.
_QUESTION_PATTERNS = tuple(re.compile(re.escape(template).replace(re.escape("{}"), "(.+)") + "$")
                           for _, template in ATTRIBUTES)
DEFAULT_GROUPS = ("often", "rarely", "never")
DEFAULT_VALUES_PER_ATTRIBUTE = 30
ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "th", "sh",
          "kr", "tr", "dr", "gl")
VOWELS = ("a", "e", "i", "o", "u")
CODAS = ("", "", "", "n", "r", "l", "s")  # most names end in a vowel
MAX_TRIES_PER_NAME = 1000


@dataclass(frozen=True)
class Fact:
    """One fact of the world: `question` about `country`'s `attribute`, answered by `answer`;
    `group` is the country's exposure group."""

    country: str
    attribute: str
    question: str
    answer: str
    group: str


def country_of(question: str) -> str | None:
    """The country a question of the `ATTRIBUTES` templates asks about ("What is the capital
    of Daruvin?" -> "Daruvin", spacing ignored), or None for any other question."""
    text = " ".join(question.split()) if isinstance(question, str) else ""
    for pattern in _QUESTION_PATTERNS:
        match = pattern.match(text)
        if match:
            return match.group(1)
    return None


def made_up_name(syllables: int, rng: random.Random) -> str:
    """A pronounceable capitalised word of `syllables` onset-vowel syllables and an optional
    final consonant: "Tesho" (te-sho), "Daruvin" (da-ru-vi-n)."""
    word = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(syllables))
    return (word + rng.choice(CODAS)).capitalize()


def draw_new_name(syllables: tuple[int, int], rng: random.Random, taken: set[str]) -> str:
    """A `made_up_name` of `syllables` = (fewest, most) syllables not in `taken` (compared in
    lower case), which it is added to; `UserError` if none turns up."""
    for _ in range(MAX_TRIES_PER_NAME):
        name = made_up_name(rng.randint(*syllables), rng)
        if name.lower() not in taken:
            taken.add(name.lower())
            return name
    raise UserError(f"ran out of new names after {len(taken)}; generate fewer facts")


def interleave_groups(n: int, weights: Sequence[float]) -> list[int]:
    """Group indices for `n` items in order: each item goes to the group furthest below its
    share `weights[g] / sum(weights)` of the items so far (ties to the first group), so every
    prefix holds each group within one item of its share. `(1, 1, 1)` -> 0, 1, 2, 0, 1, 2, ..."""
    total = sum(weights)
    counts = [0] * len(weights)
    out = []
    for i in range(n):
        deficits = [w * (i + 1) / total - c for w, c in zip(weights, counts, strict=True)]
        group = max(range(len(weights)), key=lambda g: (deficits[g], -g))
        counts[group] += 1
        out.append(group)
    return out


def _check_options(n: int, groups: Sequence[str], group_weights: Sequence[float],
                   values_per_attribute: int) -> None:
    if n < 1:
        raise UserError(f"n must be at least 1, got {n}")
    if not groups or len(set(groups)) != len(groups) or not all(groups):
        raise UserError(f"groups must be distinct non-empty names, got {list(groups)}")
    if len(group_weights) != len(groups):
        raise UserError(f"group_weights needs one weight per group ({len(groups)}), got "
                        f"{len(group_weights)}")
    if not all(w >= 0 for w in group_weights) or sum(group_weights) <= 0:
        raise UserError(f"group_weights must be non-negative with a positive sum, got "
                        f"{list(group_weights)}")
    if values_per_attribute < 2:
        raise UserError(f"values_per_attribute must be at least 2, got {values_per_attribute}")


def generate_facts(
    n: int, *, seed: int = 0, groups: Sequence[str] = DEFAULT_GROUPS,
    group_weights: Sequence[float] | None = None,
    values_per_attribute: int = DEFAULT_VALUES_PER_ATTRIBUTE,
    test_size: int | None = None, test_fraction: float | None = None,
) -> tuple[list[Fact], list[Fact]]:
    """`n` facts of a world drawn from `seed` as (train, test); see the module doc.

    `group_weights` (default: equal) are the shares of countries in each of `groups`.
    """
    group_weights = (1.0,) * len(groups) if group_weights is None else tuple(group_weights)
    _check_options(n, groups, group_weights, values_per_attribute)
    n_test = resolve_test_size(n, test_size, test_fraction)
    rng = random.Random(seed)
    taken: set[str] = set()
    pools = {attribute: [draw_new_name((2, 2), rng, taken) for _ in range(values_per_attribute)]
             for attribute, _ in ATTRIBUTES}
    n_countries = math.ceil(n / len(ATTRIBUTES))
    facts: list[Fact] = []
    for group in interleave_groups(n_countries, group_weights):
        country = draw_new_name((2, 3), rng, taken)
        for attribute, template in ATTRIBUTES:
            facts.append(Fact(country, attribute, template.format(country),
                              rng.choice(pools[attribute]), groups[group]))
    facts = facts[:n]
    return facts[n_test:], facts[:n_test]
