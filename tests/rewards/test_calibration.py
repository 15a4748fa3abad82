"""Calibration rewards: parsing rules, Brier and RLCR values, hostile confidence texts."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibrl.rewards import (
    accuracy_reward,
    brier_reward,
    parse_confidence,
    rlcr_format_ok,
    rlcr_reward,
)


def conf(body: str) -> str:
    return f"<analysis> fine </analysis> <confidence>{body}</confidence>"


@pytest.mark.parametrize(
    "body, expected",
    [
        ("0.8", 0.8),
        (" 0.8\n", 0.8),
        (".8", 0.8),
        ("1", 1.0),
        ("0", 0.0),
        ("1.0", 1.0),
        ("8e-1", 0.8),
        ("+0.5", 0.5),
        ("-0", 0.0),
        ("80%", 0.8),
        ("80 %", 0.8),
        ("100%", 1.0),
        ("0%", 0.0),
        ("7.5%", 0.075),
    ],
)
def test_accepted_forms(body, expected):
    value = parse_confidence(conf(body))
    assert value == pytest.approx(expected)
    assert math.copysign(1.0, value) == 1.0  # never -0.0


@pytest.mark.parametrize(
    "body",
    [
        "nan",
        "NaN",
        "inf",
        "-inf",
        "1e999",
        "-0.2",
        "1.01",
        "80",
        "101%",
        "",
        "  ",
        "high",
        "0.8 or so",
        "0.5 0.6",
        "0.8%%",
        "½",
        "٠.٥",
        "０.５",
        "0x1",
        "1_0",
        "0.8.1",
        "%",
    ],
)
def test_rejected_forms(body):
    assert parse_confidence(conf(body)) is None


def test_last_block_wins_and_structure():
    assert parse_confidence("<confidence>0.2</confidence> then <confidence>0.9</confidence>") == 0.9
    # a trailing unclosed tag (truncated completion) does not hide the last complete block
    assert parse_confidence("<confidence>0.3</confidence> <confidence>0.") == 0.3
    # nested tags: the innermost last value
    assert parse_confidence("<confidence><confidence>0.4</confidence></confidence>") == 0.4
    assert parse_confidence("0.7") is None
    assert parse_confidence("<confidence>0.7") is None
    assert parse_confidence("0.7</confidence>") is None
    assert (
        parse_confidence("<Confidence>0.7</Confidence>") is None
    )  # tags are exact, like the masks


HOSTILE = [
    "",
    "<confidence>",
    "</confidence>",
    "<confidence></confidence>",
    "<confidence>nan</confidence>",
    "<confidence>inf</confidence>",
    "<confidence>1e999</confidence>",
    "<confidence>-1e999</confidence>",
    "<confidence>-0.2</confidence>",
    "<confidence>80%</confidence>",
    "<confidence>" * 10_000,
    "<confidence>" + "9" * 1_000_000 + "</confidence>",
    "<confidence>0." + "1" * 1_000_000 + "</confidence>",
    "<confidence>" + "x" * 1_000_000 + "</confidence>",
    ("<confidence>0.5</confidence>" * 40_000)[:1_000_000],
    "<confidence>1e-99999</confidence>",
    "\x00<confidence>\x000.5\x00</confidence>",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("correct", [0, 1])
def test_hostile_texts_never_raise_or_nan(text, correct):
    value = parse_confidence(text)
    assert value is None or (math.isfinite(value) and 0.0 <= value <= 1.0)
    for reward in (brier_reward(correct, text), rlcr_reward(correct, "<answer>1</answer>" + text)):
        assert math.isfinite(reward)


@pytest.mark.timeout(30)  # a hang guard, not a speed target
def test_huge_inputs_parse_to_nothing_or_a_probability():
    for text in HOSTILE:
        value = parse_confidence(text)
        assert value is None or 0.0 <= value <= 1.0


@given(st.text(max_size=200), st.booleans())
def test_any_text_gives_a_finite_reward_in_range(text, correct):
    assert 0.0 <= brier_reward(correct, text) <= 1.0
    assert 0.0 <= rlcr_reward(correct, text) <= 2.0
    assert 0.0 <= brier_reward(correct, conf(text)) <= 1.0


@given(st.floats(min_value=0.0, max_value=1.0), st.booleans())
def test_brier_matches_formula(c, correct):
    assert brier_reward(correct, conf(repr(c))) == pytest.approx(1.0 - (float(correct) - c) ** 2)


def test_brier_hand_values():
    assert brier_reward(1, conf("0.8")) == pytest.approx(0.96)
    assert brier_reward(0, conf("0.8")) == pytest.approx(0.36)
    assert brier_reward(True, conf("1")) == 1.0
    assert brier_reward(False, conf("1")) == 0.0
    assert brier_reward(1, "no confidence here") == 0.0
    with pytest.raises(ValueError):
        brier_reward(0.5, conf("0.5"))


def test_rlcr_reward_is_accuracy_plus_gated_brier():
    good = "<think>t</think><answer>3</answer><analysis>a</analysis><confidence>0.75</confidence>"
    assert rlcr_format_ok(good)
    assert rlcr_reward(1, good) == pytest.approx(1 + 1 - 0.25**2)
    assert rlcr_reward(0, good) == pytest.approx(0 + 1 - 0.75**2)
    # the paper's R = acc - (c - acc)^2 is this minus 1
    assert rlcr_reward(1, good) - 1 == pytest.approx(1 - (0.75 - 1) ** 2)
    # confidence before the answer, no answer block, or unparseable confidence: Brier term 0
    for bad in (
        "<confidence>0.9</confidence><answer>3</answer>",
        "<confidence>0.9</confidence>",
        "<answer>3</answer><confidence>high</confidence>",
        "<answer>3<confidence>0.9</confidence>",
    ):
        assert not rlcr_format_ok(bad)
        assert rlcr_reward(1, bad) == 1.0 and rlcr_reward(0, bad) == 0.0
    # breaking the format never beats the worst well-formed confidence
    worst = "<answer>3</answer><confidence>0</confidence>"
    assert rlcr_reward(1, worst) == rlcr_reward(1, "<answer>3</answer>")


def test_accuracy_reward_uses_the_task_verifier():
    gt = {"target": 3, "numbers": [1, 2]}
    assert accuracy_reward("<think>x</think> <answer>1 + 2</answer>", gt) == 1.0
    assert accuracy_reward("<answer>2 - 1</answer>", gt) == 0.0
    assert accuracy_reward("<answer>" + "9" * 100_000 + "</answer>", gt) == 0.0
