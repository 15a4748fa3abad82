"""Property tests: the safe evaluator agrees with Python's eval; hostile inputs stay cheap and safe."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibrl.tasks.countdown import compute_score, evaluate_equation, extract_solution
from calibrl.tasks.countdown.safe_eval import MAX_INT_BITS
from reference import countdown_eval as ref

blank = st.sampled_from(["", " ", "  ", "\t"])
number = st.one_of(
    st.integers(0, 1000).map(str),
    st.tuples(st.integers(0, 99), st.integers(0, 99)).map(lambda t: f"{t[0]}.{t[1]}"),
    st.integers(0, 99).map(lambda n: f".{n}"),
    st.integers(0, 99).map(lambda n: f"{n}."),
)


def _binary(children):
    ops = st.sampled_from(["+", "-", "*", "/", "//"])
    plain = st.tuples(children, blank, ops, blank, children).map("".join)
    # Exponents stay small literals so eval itself cannot run away (values < 2**22000 bits).
    power = st.tuples(children, blank, st.sampled_from(["**"]), blank,
                      st.sampled_from(["0", "1", "2", "3", "-1", "-2", "(-1)"])).map("".join)
    unary = st.tuples(st.sampled_from(["-", "+"]), children).map("".join)
    paren = children.map(lambda c: f"({c})")
    return st.one_of(plain, power, unary, paren)


expression = st.recursive(number, _binary, max_leaves=8)


def _same(a, b):
    return (type(a), repr(a)) == (type(b), repr(b))


@given(expression)
def test_evaluator_matches_eval_on_random_expressions(expr):
    expected = ref.evaluate_equation(expr)
    if isinstance(expected, int):
        assert expected.bit_length() <= MAX_INT_BITS  # the strategy stays inside the bound
    assert _same(evaluate_equation(expr), expected)


# Raw character soup: mostly syntax errors, which must fail exactly like eval's.
# "**" is rewritten so random towers cannot make the reference hang.
soup = st.text(alphabet="0123456789+-*/(). \t\n", max_size=40).map(lambda s: s.replace("**", "*+"))


@given(soup)
def test_evaluator_matches_eval_on_character_soup(expr):
    assert _same(evaluate_equation(expr), ref.evaluate_equation(expr))


tagged = st.lists(
    st.sampled_from(["<answer>", "</answer>", "\n", "Assistant:", "<|im_start|>assistant", "x",
                     "1+2", " ", "<answer", "answer>"]),
    max_size=30,
).map("".join)


@given(tagged)
def test_extractor_matches_reference_regex(text):
    assert extract_solution(text) == ref.extract_solution(text)


@given(tagged, st.lists(st.integers(1, 3), max_size=3), st.integers(0, 9))
def test_score_matches_reference(text, numbers, target):
    truth = {"target": target, "numbers": numbers}
    assert compute_score(text, truth) == ref.compute_score(text, truth)


MB = 1 << 20
HOSTILE = [
    "x" * MB,
    "<answer>" * (MB // 8),  # quadratic for the lazy regex
    "<answer>" * (MB // 16) + "</answer>",
    "Assistant: " + "\n" * MB + "<answer>1+2</answer>",
    "<answer>" + "(" * MB + "1+2</answer>",
    "<answer>" + "-" * MB + "1</answer>",
    "<answer>" + "1+" * (MB // 2) + "2</answer>",
    "<answer>" + "1 " * (MB // 2) + "</answer>",
    "<answer>(1)" + "()" * (MB // 2) + "+2</answer>",
    "<answer>1" + " " * MB + "+2</answer>",
    "<answer>" + "9" * MB + "</answer>",
    "<answer>2**99**99</answer>",
    "<answer>" + "<answer>" * 1000 + "1+2" + "</answer>" * 1000,
    "<think><answer><think></answer></think>",
    "\x00\xff\ud800\U0010ffff<answer>\x00</answer>",
    bytes(range(256)).decode("latin-1") * 4000,
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.timeout(10)
def test_hostile_inputs_score_without_crashing(text):
    for truth in ({"target": 3, "numbers": [1, 2]}, {"target": 1, "numbers": [99, 99, 99]}):
        assert compute_score(text, truth) in (0, 0.1, 1.0)


def test_junk_bytes_decode_and_score():
    rng = random.Random(0)
    for _ in range(200):
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(200))).decode(
            "utf-8", errors="replace")
        assert compute_score(junk + "<answer>1+2</answer>", {"target": 3, "numbers": [1, 2]}) in (
            0, 0.1, 1.0)
