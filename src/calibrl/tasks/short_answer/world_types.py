"""World facts' types: each type's question template, the popularity tiers its group is made
of, the `WorldFact` value, and what a question is about (`world_cluster`); the facts are made of
the data in `world_facts`.

A fact's group, the row's difficulty, is `type/tier` ("capital/large"), so the difficulty table
is the accuracy a model-free guess of "big countries' capitals are known" reaches for each kind
of question. Population tiers are `POPULATION_TIERS` for countries (large >= 30 M, medium >= 5 M,
small >= 0.5 M, tiny), `CITY_TIERS` for cities and `STATE_TIERS` for a state's population in its
cities (`world_facts`); an element's is its atomic number in `ELEMENT_TIERS` (light ones are
common and taught first, the transuranic ones made in laboratories).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from calibrl.errors import UserError

TEMPLATES = {
    "capital": "What is the capital of {}?",
    "continent": "On which continent is {}?",
    "currency": "What is the currency of {}?",
    "city_country": "In which country is the city of {}?",
    "state_capital": "What is the capital of the US state of {}?",
    "element_symbol": "What is the chemical symbol of {}?",
    "element_name": "Which chemical element has the symbol {}?",
}
FACT_TYPES = tuple(TEMPLATES)
# What each type's question is about: the kind of its subject.
SUBJECT_KINDS = {"capital": "country", "continent": "country", "currency": "country",
                 "city_country": "city", "state_capital": "state", "element_symbol": "element",
                 "element_name": "element"}
# Each template as a pattern capturing its subject, the longest first, so that "the capital of
# the US state of Texas" is not read as a country's capital.
_SUBJECTS = tuple((re.compile(re.escape(TEMPLATES[t]).replace(re.escape("{}"), "(.+)") + "$"),
                   SUBJECT_KINDS[t]) for t in sorted(TEMPLATES, key=lambda t: -len(TEMPLATES[t])))
# The sources each type reads (`world_sources.PARTS`).
NEEDS = {"capital": ("countries", "cities"), "continent": ("countries",),
         "currency": ("countries",), "city_country": ("countries", "cities"),
         "state_capital": ("states", "cities"), "element_symbol": ("elements",),
         "element_name": ("elements",)}
POPULATION_TIERS = ((30_000_000, "large"), (5_000_000, "medium"), (500_000, "small"), (0, "tiny"))
CITY_TIERS = ((5_000_000, "large"), (2_000_000, "medium"), (1_000_000, "small"), (0, "tiny"))
STATE_TIERS = ((10_000_000, "large"), (3_000_000, "medium"), (1_000_000, "small"), (0, "tiny"))
ELEMENT_TIERS = ((1, "light"), (21, "middle"), (57, "heavy"), (93, "transuranic"))  # from Z
# Every tier name, most popular first: the order tables list groups in.
TIER_ORDER = tuple(dict.fromkeys(name for tiers in (POPULATION_TIERS, ELEMENT_TIERS)
                                 for _, name in tiers))
DEFAULT_TEST_FRACTION = 0.2  # some 300 test questions of the default 1,515
DEFAULT_MIN_CITY_POPULATION = 500_000
DEFAULT_CITIES_PER_COUNTRY = 10  # else a third of the cities are China's
AMBIGUOUS_CITY_POPULATION = 100_000
NAME_IN_CITY_MIN_LENGTH = 4  # "US" inside a city's name says nothing


@dataclass(frozen=True)
class WorldFact:
    """One question: `answers` accepted (the first the reference), `entities` it is about."""

    fact_type: str
    question: str
    answers: tuple[str, ...]
    tier: str
    entities: tuple[str, ...]

    @property
    def group(self) -> str:
        return f"{self.fact_type}/{self.tier}"


def world_cluster(question: str) -> str | None:
    """What a world question is about, as a readout cluster: "country: France" for its capital,
    continent and currency (the made-up facts' form, `facts.country_of`), "city: Osaka",
    "state: Texas", "element: iron" (and "element: Fe": a name and its symbol are not linked
    without the data); None for any other question. Spacing is ignored."""
    text = " ".join(question.split()) if isinstance(question, str) else ""
    for pattern, kind in _SUBJECTS:
        match = pattern.match(text)
        if match:
            return f"{kind}: {match.group(1)}"
    return None


def tier(value: int, tiers: Sequence[tuple[int, str]]) -> str:
    """The name of the highest of `tiers`' (threshold, name) pairs that `value` reaches."""
    return max((t for t in tiers if value >= t[0]), key=lambda t: t[0])[1]


def parse_types(types: Iterable[str] | None) -> tuple[str, ...]:
    """`types` checked against `FACT_TYPES`, in that order; None: all of them."""
    if types is None:
        return FACT_TYPES
    chosen = set(types)
    unknown = sorted(chosen - set(FACT_TYPES))
    if unknown or not chosen:
        raise UserError(f"unknown fact type {', '.join(unknown) or '(none given)'}; choose from "
                        f"{', '.join(FACT_TYPES)}")
    return tuple(t for t in FACT_TYPES if t in chosen)
