"""How world facts name things: accepted answers kept once up to normalisation, the other
spellings the data imply ("Saint Paul" and "St. Paul", "US Dollar"), and names as a question
writes them ("the United Kingdom", "Ghaziabad")."""

from __future__ import annotations

from collections.abc import Iterable

from calibrl.tasks.short_answer.normalize import fold_accents, normalize_answer
from calibrl.tasks.short_answer.world_sources import Country

# A country name holding one of these words takes "the" ("the United Kingdom").
WORDS_TAKING_THE = frozenset({"united", "republic", "kingdom", "islands", "territory",
                              "territories", "states", "emirates"})


def distinct_answers(names: Iterable[str]) -> tuple[str, ...]:
    """Each answer once, up to normalisation (`normalize_answer`), in order; none empty."""
    kept: dict[str, str] = {}
    for name in names:
        kept.setdefault(normalize_answer(name), name.strip())
    kept.pop("", None)
    return tuple(kept.values())


def saint_spellings(name: str) -> tuple[str, ...]:
    """`name` and its other spelling of "Saint": "Saint Paul" <-> "St. Paul" ("St Paul" is the
    same once normalised)."""
    for long, short in (("Saint ", "St. "), ("Saint ", "St ")):
        if name.startswith(long):
            return name, short + name[len(long):]
        if name.startswith(short):
            return name, long + name[len(short):]
    return (name,)


def country_phrase(name: str) -> str:
    """A country's name as a question says it: "the" before one that takes it."""
    if name.startswith("The "):
        return "the " + name[4:]
    return f"the {name}" if WORDS_TAKING_THE & set(name.lower().split()) else name


def plain_name(name: str) -> str:
    """A name as a question writes it: accents folded ("Ghāziābād" -> "Ghaziabad", "Xi’an" ->
    "Xi'an"), unless something beyond ASCII would remain ("Łódź" stays)."""
    folded = fold_accents(name.replace("’", "'"))
    return folded if folded.isascii() and folded.strip() else name


def currency_answers(country: Country) -> tuple[str, ...]:
    """A currency's ISO code and its names: the name; each word of a name of several that does
    not name the country or its people ("Yuan Renminbi": "Yuan", "Renminbi"; "Belarusian
    ruble": "ruble"); a plural name's singular (GeoNames writes "Riels"); and for a national
    currency (its code starts with the country's) each of these after the demonym and after the
    country code: "Japanese Yen", "US Dollar", "Chinese Yuan"."""
    name, code = country.currency_name, country.currency_code
    demonyms = [d.strip() for d in (country.demonym or "").replace("/", ",").split(",")]
    own = {normalize_answer(word) for word in [country.name, *demonyms]}
    words = name.split()
    names = [name, *(word for word in words if len(words) > 1
                     and normalize_answer(word) not in own)]
    if len(words) == 1 and name.endswith("s") and not name.endswith("ss"):
        names.append(name[:-1])
    answers = [names[0], code, *names[1:]]
    if code[:2] == country.code:
        answers += [f"{prefix} {n}" for prefix in [*demonyms, country.code] if prefix
                    for n in names if not normalize_answer(n).startswith(normalize_answer(prefix))]
    return distinct_answers(answers)
