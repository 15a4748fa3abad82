"""Truncation points, token texts and where a generated chain sits in its completion."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibrl.errors import UserError
from calibrl.probe.points import (
    fraction_points,
    step_cuts,
    step_points,
    token_texts,
)
from calibrl.probe.traces import chain_span
from calibrl.settings.probe import DEFAULT_FRACTIONS, ProbeSection, parse_points


@given(st.integers(0, 500))
def test_fraction_points_round_half_up_and_span_the_chain(n):
    points = fraction_points(n, DEFAULT_FRACTIONS)
    assert points[0].cut == 0 and points[-1].cut == n
    cuts = [p.cut for p in points]
    assert cuts == sorted(cuts)
    for p in points:
        assert abs(p.cut - p.x * n) <= 0.5 + 1e-9


def test_fraction_points_examples():
    assert [p.cut for p in fraction_points(10, DEFAULT_FRACTIONS)] == list(range(11))
    assert [p.cut for p in fraction_points(4, (0.125, 0.25, 0.375))] == [1, 1, 2]


def test_parse_points():
    assert parse_points("steps") == "steps"
    assert parse_points("1, 0,0.5,0.5") == (0.0, 0.5, 1.0)
    for bad in ("", "a,b", "1.5", "-0.1", "nan"):
        with pytest.raises(UserError):
            parse_points(bad)
    assert ProbeSection().points == DEFAULT_FRACTIONS and ProbeSection(points="steps").by_steps


@pytest.mark.parametrize("texts, expected", [
    # A cut keeps a step's text, not the line break that ends it (the forced text brings one).
    (["\n", "14", " + ", "6", " = ", "20", "\n", "20", " / ", "20", " = ", "1"], [0, 6, 12]),
    (["So", " x", ".", " Then", " y", ".", " Done"], [0, 3, 6, 7]),
    (["3", ".", "5", " is", " it"], [0, 5]),  # a decimal point ends no sentence
    (["a", "\n\n", "b", ".\n", "c"], [0, 1, 3, 5]),
    (["a", "b\n", "c"], [0, 1, 3]),  # a boundary inside a token falls before it
    ([], [0]),
])
def test_step_cuts(texts, expected):
    assert step_cuts(texts) == expected


def test_step_points_x_is_the_share_of_tokens():
    points = step_points(["a", ".", " b", "."])
    assert [(p.x, p.cut) for p in points] == [(0.0, 0), (0.5, 2), (1.0, 4)]
    assert [(p.x, p.cut) for p in step_points([])] == [(0.0, 0), (1.0, 0)]


@given(st.text(st.characters(codec="utf-8"), max_size=40))
def test_token_texts_join_to_the_decoded_text(tokenizer, text):
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert "".join(token_texts(tokenizer, ids)) == tokenizer.decode(ids)


def _span_text(tokenizer, completion, **tags):
    ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
    start, end = chain_span(tokenizer, ids, tags.get("open", "<think>"),
                            tags.get("close", "</think>"))
    return tokenizer.decode(ids[:start]), tokenizer.decode(ids[start:end])


@pytest.mark.parametrize("completion, head, chain", [
    # Trailing whitespace is not the chain's: the probe's forced text brings the line break.
    ("<think>\n1 + 2 = 3\n</think>\n<answer>1 + 2</answer>", "<think>", "\n1 + 2 = 3"),
    ("<think>\n1 + 2 = 3\n<answer>1 + 2</answer>", "<think>", "\n1 + 2 = 3"),
    ("<think> no end at all", "<think>", " no end at all"),
    ("1 + 2 = 3 </think><answer>1 + 2</answer>", "", "1 + 2 = 3"),
    ("<think>\n\n</think><answer>3</answer>", "<think>", ""),
    ("<think></think><answer>3</answer>", "<think>", ""),
])
def test_chain_span(tokenizer, completion, head, chain):
    assert _span_text(tokenizer, completion) == (head, chain)


def test_chain_span_never_takes_a_token_holding_part_of_a_tag(tokenizer):
    # With tags the tokenizer does not know, a tag is several byte-level pieces.
    head, chain = _span_text(tokenizer, "[[go]] step one. [[/go]] 3", open="[[go]]",
                             close="[[/go]]")
    assert head.endswith("[[go]]") and "[[" not in chain and "go]]" not in chain
    assert "step one." in chain


def test_fraction_points_handle_float_noise():
    # 0.3 * 10 = 3.0000000000000004 and 0.7 * 10 = 7.000000000000001: still 3 and 7.
    assert [p.cut for p in fraction_points(10, (0.3, 0.7))] == [3, 7]
    assert math.floor(0.3 * 10 + 0.5) == 3
