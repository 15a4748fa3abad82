"""World facts: questions of real knowledge made from public data packages (`world_sources`), for
a pretrained model that knows some of them ("What is the capital of France?" -> "Paris").

Each fact (`world_types.WorldFact`) has a type, accepted answers (the data's spellings, the
first the reference), the entities it is about (what the split keeps on one side) and a tier of
a public popularity measure (`world_types`):

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

A state's population is the summed population of its GeoNames cities of 15,000 or more (the
packages hold no state population; this ranks states as their population does). City questions
ask of each country's most populous cities (at most `cities_per_country`) of
`min_city_population` or more, leaving out a name that another country's city of
`AMBIGUOUS_CITY_POPULATION` shares (Córdoba: Argentina and Spain) and one that names its
country (Mexico City); the question writes the name with its accents folded ("Ghaziabad").

Entities: "country:FR", "city:2988507" (GeoNames id; a capital the city list lacks:
"city:FR:paris"), "state:TX", "element:26"; continents and currencies are answers, not
entities, or six continents would tie every country to most others.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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
from calibrl.tasks.short_answer.world_types import (
    AMBIGUOUS_CITY_POPULATION,
    CITY_TIERS,
    DEFAULT_CITIES_PER_COUNTRY,
    DEFAULT_MIN_CITY_POPULATION,
    ELEMENT_TIERS,
    FACT_TYPES,
    NAME_IN_CITY_MIN_LENGTH,
    NEEDS,
    POPULATION_TIERS,
    STATE_TIERS,
    TEMPLATES,
    WorldFact,
    parse_types,
    tier,
)


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


def is_country_name(spelling: str) -> bool:
    """Whether an alternative spelling may stand as an answer: not a two-letter ISO code, which
    normalises to a common word as often as not ("IN", "IT", "NO"), so a reply that merely says
    "in" would name India."""
    return len(normalize_answer(spelling)) > 2


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
                               distinct_answers([country.name,
                                                 *filter(is_country_name, country.other_names)]),
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
