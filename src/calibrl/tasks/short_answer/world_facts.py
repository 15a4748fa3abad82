"""World facts: questions of real knowledge made from public data packages (`world_sources`), for
a pretrained model that knows some of them ("What is the capital of France?" -> "Paris").

Each fact has a type (`FACT_TYPES`), accepted answers (the data's spellings, the first the
reference), the entities it is about (`entities`: what the split keeps on one side) and a tier
of a public popularity measure; its group, the row's difficulty, is `type/tier`
("capital/large"), so the difficulty table is the accuracy a model-free guess of "big countries'
capitals are known" reaches for each kind of question.

- capital ("What is the capital of France?"): every package's spelling of the capital ("Saint"
  also as "St."); tier: the country's population;
- continent ("On which continent is France?"): GeoNames' continent, and countryinfo's region
  where it names another continent (Cyprus: Europe or Asia); tier: the country's population;
- currency ("What is the currency of France?"): its name ("Euro") and ISO code, the words of
  a name of several ("Yuan Renminbi": "Yuan"), and for a national currency the names after
  the demonym and the country code ("US Dollar"; `world_names.currency_answers`); tier: the
  country's population;
- city_country ("In which country is the city of Lyon?"): the country's names and alternative
  spellings; tier: the city's population;
- state_capital ("What is the capital of the US state of Texas?"): the `us` package's capital;
  tier: the state's population in cities (below);
- element_symbol ("What is the chemical symbol of iron?"): the symbol; element_name ("Which
  chemical element has the symbol Fe?"): the name and its IUPAC spelling; tier: atomic number.

Population tiers are `POPULATION_TIERS` for countries (large >= 30 M, medium >= 5 M, small >=
0.5 M, tiny), `CITY_TIERS` for cities; a state's is the summed population of its GeoNames cities
of 15,000 or more (the packages hold no state population; it ranks states as their population
does) in `STATE_TIERS`; an element's is its atomic number in `ELEMENT_TIERS` (light ones are
common and taught first, the transuranic ones made in laboratories). City questions ask of
each country's most populous cities (at most `cities_per_country`) of `min_city_population` or
more, leaving out a name that another country's city of `AMBIGUOUS_CITY_POPULATION` shares
(Córdoba: Argentina and Spain) and one that names its country (Mexico City); the question writes
the name with its accents folded ("Ghaziabad"). Entities: "country:FR", "city:2988507"
(GeoNames id; a capital the city list lacks: "city:FR:paris"), "state:TX", "element:26";
continents and currencies are answers, not entities, or six continents would tie every country
to most others.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from calibrl.errors import UserError
from calibrl.tasks.short_answer.normalize import normalize_answer
from calibrl.tasks.short_answer.world_names import (
    country_phrase,
    currency_answers,
    distinct_answers,
    plain_name,
    saint_spellings,
)
from calibrl.tasks.short_answer.world_sources import (
    City,
    Country,
    Element,
    State,
    World,
    read_world,
)

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


def city_key(city: City) -> str:
    return f"city:{city.geonameid}"


def by_population(cities: Iterable[City]) -> list[City]:
    """Most populous first, ties by GeoNames id."""
    return sorted(cities, key=lambda c: (-c.population, c.geonameid))


def _city_index(cities: Sequence[City]) -> dict[tuple[str, str], City]:
    """(country code, normalised name) and (country code/division, name) -> the most populous
    such city."""
    index: dict[tuple[str, str], City] = {}
    for city in by_population(cities):
        name = normalize_answer(city.name)
        index.setdefault((city.country_code, name), city)
        index.setdefault((f"{city.country_code}/{city.admin1}", name), city)
    return index


def _capital_key(place: str, capitals: Sequence[str], index: dict) -> str:
    for capital in capitals:
        city = index.get((place, normalize_answer(capital)))
        if city is not None:
            return city_key(city)
    return f"city:{place}:{normalize_answer(capitals[0])}"


def country_facts(countries: Sequence[Country], cities: Sequence[City],
                  types: Iterable[str]) -> list[WorldFact]:
    """Capital, continent and currency facts (those in `types`), type by type."""
    index, facts = _city_index(cities), []
    for country in countries:
        key, level = f"country:{country.code}", tier(country.population, POPULATION_TIERS)
        capitals = [s for capital in country.capitals for s in saint_spellings(capital)]
        answers = {"capital": distinct_answers(capitals),
                   "continent": distinct_answers([country.continent, country.region or ""]),
                   "currency": currency_answers(country) if country.currency_name else ()}
        entities = {"capital": (key, _capital_key(country.code, country.capitals, index))}
        name = country_phrase(country.name)
        facts += [WorldFact(t, TEMPLATES[t].format(name), answers[t], level,
                            entities.get(t, (key,))) for t in types if answers.get(t)]
    return sorted(facts, key=lambda f: FACT_TYPES.index(f.fact_type))


def _names_its_country(city: City, country: Country) -> bool:
    words = f" {normalize_answer(city.name)} "
    names = (normalize_answer(n) for n in (country.name, *country.other_names))
    return any(f" {n} " in words for n in names if len(n) >= NAME_IN_CITY_MIN_LENGTH)


def city_facts(countries: Sequence[Country], cities: Sequence[City],
               min_population: int = DEFAULT_MIN_CITY_POPULATION,
               per_country: int = DEFAULT_CITIES_PER_COUNTRY) -> list[WorldFact]:
    """"In which country is the city of X?" for the cities the module doc says, most populous
    first, at most `per_country` of a country's; a name two of a country's cities share is
    asked once, of the larger."""
    by_code = {country.code: country for country in countries}
    countries_named: dict[str, set[str]] = {}
    for city in cities:
        if city.population >= AMBIGUOUS_CITY_POPULATION:
            countries_named.setdefault(normalize_answer(city.name), set()).add(city.country_code)
    facts, asked, per_code = [], set(), dict.fromkeys(by_code, 0)
    for city in by_population(cities):
        country, name = by_code.get(city.country_code), normalize_answer(city.name)
        if (city.population < min_population or country is None or name in asked
                or per_code[country.code] >= per_country
                or len(countries_named.get(name, ())) > 1 or _names_its_country(city, country)):
            continue
        asked.add(name)
        per_code[country.code] += 1
        facts.append(WorldFact("city_country",
                               TEMPLATES["city_country"].format(plain_name(city.name)),
                               distinct_answers([country.name, *country.other_names]),
                               tier(city.population, CITY_TIERS),
                               (city_key(city), f"country:{country.code}")))
    return facts


def state_facts(states: Sequence[State], cities: Sequence[City]) -> list[WorldFact]:
    """The capital of each state, tiered by the population of the state's cities."""
    population: dict[str, int] = {}
    for city in cities:
        if city.country_code == "US":
            population[city.admin1] = population.get(city.admin1, 0) + city.population
    index = _city_index(cities)
    return [WorldFact("state_capital", TEMPLATES["state_capital"].format(state.name),
                      distinct_answers(saint_spellings(state.capital)),
                      tier(population.get(state.code, 0), STATE_TIERS),
                      (f"state:{state.code}", _capital_key(f"US/{state.code}", [state.capital],
                                                           index)))
            for state in states]


def element_facts(elements: Sequence[Element], types: Iterable[str]) -> list[WorldFact]:
    """Symbol-of-element and element-of-symbol facts (those in `types`), type by type."""
    facts = []
    for kind in [t for t in ("element_symbol", "element_name") if t in types]:
        for e in elements:
            subject = e.name if kind == "element_symbol" else e.symbol
            answers = (e.symbol,) if kind == "element_symbol" else distinct_answers(
                name.capitalize() for name in (e.name, *e.other_names))
            facts.append(WorldFact(kind, TEMPLATES[kind].format(subject), answers,
                                   tier(e.number, ELEMENT_TIERS), (f"element:{e.number}",)))
    return facts


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


def world_facts(world: World, types: Iterable[str] | None = None,
                min_city_population: int = DEFAULT_MIN_CITY_POPULATION,
                cities_per_country: int = DEFAULT_CITIES_PER_COUNTRY) -> list[WorldFact]:
    """Every fact of `types` (default all) that `world` gives, type by type in `FACT_TYPES`
    order; `world` must hold the parts they need (`NEEDS`)."""
    types = parse_types(types)
    facts = country_facts(world.countries, world.cities, types)
    if "city_country" in types:
        facts += city_facts(world.countries, world.cities, min_city_population,
                            cities_per_country)
    if "state_capital" in types:
        facts += state_facts(world.states, world.cities)
    facts += element_facts(world.elements, types)
    return sorted(facts, key=lambda f: FACT_TYPES.index(f.fact_type))  # stable within a type


def read_world_facts(types: Iterable[str] | None = None, **options: int) -> list[WorldFact]:
    """`world_facts` of `types` (default all), reading only the packages they need; `options`
    are `world_facts`' (`min_city_population`, `cities_per_country`)."""
    types = parse_types(types)
    return world_facts(read_world({part for t in types for part in NEEDS[t]}), types, **options)
