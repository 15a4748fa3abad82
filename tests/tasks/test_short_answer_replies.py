"""Reading free-form replies by name: the lenient reading and the rewrite into answer tags."""

from __future__ import annotations

import pytest

from calibrl.tasks.short_answer.replies import Vocabulary, names_accepted, vocabularies

CAPITALS = [["Lima"], ["Mexico City", "Ciudad de México"], ["Brasília"], ["Paris"]]
COUNTRIES = [["Japan"], ["Mexico"], ["France"]]


@pytest.mark.parametrize(("reply", "named"), [
    ("The capital of Peru is Lima.", True),
    ("Lima", True),
    ("The capital of Brazil is Brasilia.", True),   # accents folded
    ("Limassol is in Cyprus.", False),               # whole words only
    ("<think>Lima?</think><answer>Cusco</answer>", False),  # a tagged reply: its answer
    ("<think>Cusco?</think><answer>the Lima</answer>", True),
    ("", False),
])
def test_the_lenient_reading_finds_an_accepted_name(reply, named):
    assert names_accepted(reply, ["Lima", "Brasília"]) is named


def test_the_lenient_reading_never_raises_on_junk():
    assert names_accepted(None, ["Lima"]) is False  # type: ignore[arg-type]
    assert names_accepted("Lima", ["", "the"]) is False  # empty answers name nothing
    assert names_accepted("\x00\udcff" * 10_000 + " Lima", [b"x", "Lima"]) is True  # type: ignore[list-item]


@pytest.mark.parametrize(("reply", "value"), [
    ("The capital of Mexico is Mexico City.", "Mexico City"),
    ("The capital of Mexico is Ciudad de Mexico.", "Mexico City"),  # an alias, accents folded
    ("Lima is the capital, not Paris.", "Paris"),  # the name said last
    ("I do not know.", None),
    ("", None),
])
def test_a_reply_names_the_value_said_last(reply, value):
    assert Vocabulary(CAPITALS).named_value(reply) == value


def test_the_longer_name_wins_where_both_start():
    countries = Vocabulary(COUNTRIES + [["Mexico City"]])
    assert countries.named_value("It is in Mexico City") == "Mexico City"
    assert countries.named_value("Osaka is a city in Japan.") == "Japan"


def test_a_long_reply_is_read_only_at_its_start():
    assert Vocabulary(CAPITALS).named_value("x " * 5_000 + "Lima") is None


def test_vocabularies_are_one_per_kind():
    vocab = vocabularies([("capital", ["Lima"]), ("capital", ["Paris"]), ("city", ["Japan"])])
    assert set(vocab) == {"capital", "city"}
    assert len(vocab["capital"]) == 2
    assert vocab["city"].named_value("in Japan") == "Japan"
    assert vocab["capital"].named_value("in Japan") is None
    assert Vocabulary([]).named_value("Lima") is None


@pytest.mark.parametrize(("reply", "prefix"), [
    ("The capital of Peru is Lima, a city of ten million.", "The capital of Peru is Lima"),
    ("Lima or Paris? Paris, I think.", "Lima or Paris? Paris"),
    ("The capital of Mexico is Mexico City.", "The capital of Mexico is Mexico City"),
    ("I do not know.", None),
    ("", None),
])
def test_the_prefix_ends_right_after_the_value_said_last(reply, prefix):
    vocab = Vocabulary(CAPITALS + [["Mexico City"]])
    assert vocab.named_prefix(reply) == prefix
    if prefix is not None:
        assert vocab.named_value(prefix) == vocab.named_value(reply)


def test_the_prefix_does_not_stop_inside_a_longer_name():
    countries = Vocabulary(COUNTRIES + [["Mexico City"]])
    assert countries.named_prefix("It is in Mexico City, not Mexico") == (
        "It is in Mexico City, not Mexico")
    assert countries.named_prefix("Mexico City is big") == "Mexico City"
