"""Numeric QA's verifier and score: exact value of a strict numeric literal in the last answer
block; 0 / 0.1 / 1.0 scores; hostile text never raises, never hangs, never scores NaN."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrl.errors import UserError
from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, THINK_OPEN
from calibrl.tasks import get_task
from calibrl.tasks.numeric_qa import format_number, parse_answer, parse_truth

QA = get_task("numeric_qa")


def truth(answer, question="Tom has 2 apples. How many apples does Tom have now?"):
    return QA.check_ground_truth({"question": question, "answer": answer, "num_steps": 1})


def answered(text: str) -> str:
    return f"{ANSWER_OPEN}{text}{ANSWER_CLOSE}"


@pytest.mark.parametrize("text, value", [
    ("42", 42), ("-3", -3), ("+7", 7), (" 7 ", 7), ("0", 0), ("-0", 0),
    ("42.0", 42), ("2.50", Fraction(5, 2)), ("-0.75", Fraction(-3, 4)),
    ("1/2", Fraction(1, 2)), ("-3/4", Fraction(-3, 4)), ("84/2", 42),
    ("1,234", 1234), ("12,345,678", 12345678),
])
def test_strict_literals_read_as_exact_values(text, value):
    assert parse_answer(text) == value


@pytest.mark.parametrize("text", [
    "", " ", "42 apples", "$42", "42%", "1e3", "1E3", "nan", "NaN", "inf", "-inf", "Infinity",
    ".5", "5.", "1/0", "1/2/3", "1.5/2", "1,23", "1,2345", ",123", "4 2", "--4", "+-4",
    "٣", "４２", "0x2A", "42\x00", "(42)", "42.0.0", "1_000", "9" * 101,
])
def test_anything_else_is_no_number(text):
    assert parse_answer(text) is None


def test_non_strings_are_no_number():
    for value in (None, 42, 4.2, b"42", ["42"]):
        assert parse_answer(value) is None


@pytest.mark.parametrize("value, canonical", [
    (Fraction(42), "42"), (Fraction(-3), "-3"), (Fraction(1, 2), "0.5"),
    (Fraction(-3, 4), "-0.75"), (Fraction(1, 3), "1/3"), (Fraction(-7, 6), "-7/6"),
    (Fraction(1, 80), "0.0125"), (Fraction(0), "0"),
])
def test_canonical_text_reads_back_as_the_same_value(value, canonical):
    assert format_number(value) == canonical
    assert parse_answer(canonical) == value


@pytest.mark.parametrize("given_answer, correct", [
    ("5", True), ("5.0", True), ("10/2", True), ("+5", True), (" 5 ", True),
    ("6", False), ("-5", False), ("5 apples", False), ("five", False), ("", False),
    ("5e0", False), ("0.5e1", False),
])
def test_verify_compares_values(given_answer, correct):
    gt = truth(5)
    completion = f"{THINK_OPEN}\n2 + 3 = 5\n{THINK_CLOSE}\n{answered(given_answer)}"
    assert QA.verify(completion, gt) is correct


def test_only_the_last_complete_answer_block_counts():
    gt = truth(5)
    assert QA.verify(answered("4") + answered("5"), gt)
    assert not QA.verify(answered("5") + answered("4"), gt)
    assert QA.verify(answered("5") + ANSWER_OPEN + "4", gt)  # the unclosed block is not an answer
    assert not QA.verify("5", gt)  # no block: no answer
    assert not QA.verify(f"{ANSWER_OPEN}{answered('5')}{ANSWER_CLOSE}", gt)  # nested: reads "5</answer>"


def test_score_is_zero_format_or_one():
    gt = truth("1/2")
    prompt = ("<|im_start|>user\nHalf of 1? Answer in " + answered(" ")
              + "<|im_end|>\n<|im_start|>assistant\n")
    assert QA.score(prompt + answered("0.5"), gt) == 1.0
    assert QA.score(prompt + answered("1/2"), gt) == 1.0
    assert QA.score(prompt + answered("0.4"), gt) == pytest.approx(0.1)
    assert QA.score(prompt + answered("half"), gt) == pytest.approx(0.1)
    # The prompt's own tags are not the model's answer: a response without a block scores 0.
    assert QA.score(prompt + "the answer is 0.5", gt) == 0.0
    assert QA.score(answered("0.5"), gt) == 1.0  # a response alone works too


def test_ground_truth_answers_are_normalised_leniently():
    assert truth(7)["answer"] == "7"
    assert truth(7.0)["answer"] == "7"
    assert truth(0.1)["answer"] == "0.1"  # the float's decimal text, not its binary value
    assert truth("1,000")["answer"] == "1000"
    assert truth("Half of 48 is 48/2 = <<48/2=24>>24.\n#### 24")["answer"] == "24"
    assert truth("3/6")["answer"] == "0.5"
    assert parse_truth("#### -2") == -2


@pytest.mark.parametrize("answer", [True, None, float("nan"), float("inf"), "about 5",
                                    "#### many", [5], "1e400"])
def test_unusable_ground_truth_answers_are_user_errors(answer):
    with pytest.raises(UserError) as err:
        truth(answer)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("bad", [None, 5, {"answer": "5"}, {"question": "", "answer": "5"},
                                 {"question": "Q?", "answer": "5", "num_steps": -1},
                                 {"question": "Q?", "answer": "5", "num_steps": "two"}])
def test_malformed_ground_truths_are_user_errors(bad):
    with pytest.raises(UserError):
        QA.check_ground_truth(bad)


HOSTILE = [
    answered("9" * 10**6),
    answered("1" + "0" * 10000),
    answered("10**10000"),
    answered("1/" + "0" * 5000),
    answered("nan"), answered("inf"), answered("-inf"),
    ANSWER_OPEN * 100000 + "5" + ANSWER_CLOSE * 100000,
    (ANSWER_OPEN + "5") * 100000,
    ANSWER_CLOSE * 100000,
    "\udcff\x00\xff" * 1000 + answered("\x00"),
    answered("5" + "\u0301" * 10000),
]


@pytest.mark.timeout(30)  # a hang guard, not a speed target
@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_text_never_hangs_and_scores_a_finite_known_value(text):
    gt = truth(5)
    verdict = QA.verify(text, gt)
    score = QA.score(text, gt)
    assert verdict in (True, False)
    assert math.isfinite(score) and score in (0.0, QA.format_score, QA.correct_score)


junk_truth = st.one_of(
    st.none(), st.integers(), st.text(max_size=10),
    st.fixed_dictionaries({"question": st.one_of(st.text(max_size=5), st.none()),
                           "answer": st.one_of(st.text(max_size=8), st.integers(),
                                               st.floats(), st.none())}),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), st.text(max_size=20).map(answered),
                 st.binary(max_size=50).map(repr)), junk_truth)
def test_verify_and_score_never_raise_on_junk(text, ground_truth):
    assert QA.verify(text, ground_truth) in (True, False)
    try:
        score = QA.score(text, ground_truth)
    except Exception:  # a junk ground truth may fail score; the reward manager catches that
        return
    assert score in (0.0, QA.format_score, QA.correct_score)


@settings(max_examples=200, deadline=None)
@given(st.fractions(max_denominator=10**6).filter(lambda f: abs(f) < 10**12))
def test_every_value_verifies_against_its_own_canonical_text(value):
    gt = truth(format_number(value))
    assert QA.verify(answered(format_number(value)), gt)
    assert not QA.verify(answered(format_number(value + 1)), gt)
