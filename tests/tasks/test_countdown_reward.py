"""Countdown reward: every branch of spec §1, table-driven, checked against the eval reference."""

import numpy as np
import pytest

from calibrl.protocol.completions import ensure_answer_tags
from calibrl.tasks.countdown import (
    compute_score,
    evaluate_equation,
    extract_solution,
    validate_equation,
    verify_equation_strict,
)
from reference import countdown_eval as ref

GT = {"target": 1562, "numbers": [1455, 1961, 2068]}

EXTRACT_CASES = [
    # (solution_str, expected equation)
    ("User: q\nAssistant: <think>x</think>\n<answer>2068 - (1961 - 1455)</answer>",
     "2068 - (1961 - 1455)"),
    # text before the first "Assistant:" never counts, even on what becomes the last line
    ("<answer>1+2</answer> Assistant: no tags", None),
    # only the part after the FIRST marker; its last line
    ("Assistant: a\nAssistant: <answer>3*4</answer>", "3*4"),
    ("<|im_start|>user\n<answer>9</answer><|im_end|>\n<|im_start|>assistant\n<answer> 5+6 </answer>",
     "5+6"),
    # "Assistant:" wins over the chat marker when both occur
    ("<|im_start|>assistant\nx\nAssistant: <answer>7</answer>", "7"),
    # no marker: the whole string (the probe passes the answer alone)
    ("<answer>1 + 2</answer>", "1 + 2"),
    # the answer must be on the last line
    ("<answer>1+2</answer>\nthat's it", None),
    ("<answer>1+2</answer>\n", None),
    # the last match on the last line
    ("<answer>1</answer> or <answer>2</answer>", "2"),
    # lazy match: an inner opening tag stays in the group
    ("<answer>1<answer>2</answer>", "1<answer>2"),
    ("<answer>1</answer><answer>2", "1"),
    ("<answer></answer>", ""),
    ("<answer>1+2", None),
    ("no tags at all", None),
    ("", None),
]


@pytest.mark.parametrize("text,expected", EXTRACT_CASES)
def test_extract_solution(text, expected):
    assert extract_solution(text) == expected
    assert ref.extract_solution(text) == expected


VALIDATE_CASES = [
    ("2068 - (1961 - 1455)", [1455, 1961, 2068], True),
    ("(1961 - 1455) - 2068", (2068, 1961, 1455), True),
    ("1 + 2", np.array([2, 1]), True),
    ("1 + 1", [1, 2], False),  # reused number
    ("1 + 2 + 3", [1, 2], False),  # extra number
    ("1", [1, 2], False),  # missing number
    ("4.0 + 1", [4, 1], False),  # 4.0 reads as 4 and 0
    ("4.0 + 1", [0, 4, 1], True),
    ("0012 + 3", [12, 3], True),  # int("0012") == 12
    ("", [], True),
    ("1" * 5000, [1], False),  # int() refuses >4300 digits: the reference returns False
    ("1+2", [1, None], False),  # unsortable numbers
]


@pytest.mark.parametrize("equation,numbers,expected", VALIDATE_CASES)
def test_validate_equation(equation, numbers, expected):
    assert validate_equation(equation, numbers) is expected
    assert bool(ref.validate_equation(equation, numbers)) is expected


EVALUATE_CASES = [
    ("1 + 2 * 3", 7),
    ("(1 + 2) * 3", 9),
    ("7 / 2", 3.5),
    ("7 // 2", 3),
    ("-7 // 2", -4),
    ("2 ** 10", 1024),
    ("2 ** -1", 0.5),
    ("2 ** 3 ** 2", 512),  # right-associative
    ("-2 ** 2", -4),  # unary minus binds looser than **
    ("--3", 3),
    ("+-+3", -3),
    ("1.5 * 2", 3.0),
    (".5 + 3.", 3.5),
    ("1 / 3 * 3", 1.0),
    (" 1 + 2", 3),  # eval strips leading blanks
    ("\t(1 + 2)", 3),
    ("1 + 2\n", 3),  # `$` accepts a trailing newline
    ("1/0", None),
    ("1//0", None),
    ("0 ** -1", None),
    ("1 +", None),
    ("()", ()),
    ("...", Ellipsis),
    ("(1)(2)", None),  # a call: TypeError under eval
    ("1 % 2", None),  # not an allowed character
    ("2 ^ 3", None),
    ("abs(-1)", None),
    ("1e5", None),
    ("1_000", None),
    ("1 = 1", None),
    ("(" * 201 + "1" + ")" * 201, None),  # Python's parser nesting limit
]


@pytest.mark.parametrize("equation,expected", EVALUATE_CASES)
def test_evaluate_equation(equation, expected):
    got = evaluate_equation(equation)
    assert (type(got), got) == (type(expected), expected)
    want = ref.evaluate_equation(equation)
    assert (type(want), want) == (type(expected), expected)


@pytest.mark.parametrize("equation", ["99**98**97", "2**99**99", "9**9**9", "((100**99)**98)**97",
                                      "2**(2**20)*3", "(10**5000)**10"])
@pytest.mark.timeout(5)
def test_power_towers_are_refused(equation):
    assert evaluate_equation(equation) is None


def test_large_but_feasible_powers_match_eval():
    for eq in ["2**1000", "99**98", "(99**98)**2", "3**-40", "2.0**1000", "2**1000/2**999"]:
        assert evaluate_equation(eq) == ref.evaluate_equation(eq)


SCORE_CASES = [
    # (solution_str, ground_truth, expected)
    ("Assistant: <answer>2068 - (1961 - 1455)</answer>", GT, 1.0),
    ("Assistant: <think>no answer</think>", GT, 0),
    ("Assistant: <answer>2068 + 1961 - 1455</answer>", GT, 0.1),  # right numbers, wrong value
    ("Assistant: <answer>2068 - 1961</answer>", GT, 0.1),  # missing a number
    ("Assistant: <answer>2068 - (1961 - 1455) + 0</answer>", GT, 0.1),  # extra number
    ("Assistant: <answer>2068 - (1961 - 1455) = 1562</answer>", GT, 0.1),  # bad character
    ("Assistant: <answer></answer>", GT, 0.1),  # empty equation is not None
    ("Assistant: <answer>1 / (2 - 2)</answer>", {"target": 0, "numbers": [1, 2, 2]}, 0.1),
    ("<answer>2 / 3</answer>", {"target": 0.666671, "numbers": [2, 3]}, 1.0),  # |d| < 1e-5
    ("<answer>2 / 3</answer>", {"target": 0.666677, "numbers": [2, 3]}, 0.1),  # |d| >= 1e-5
    ("<answer>...</answer>", {"target": 1, "numbers": []}, 0.1),  # Ellipsis - target raises
    ("<answer>()</answer>", {"target": 1, "numbers": []}, 0.1),
    ("<answer>3 * 4</answer>", {"target": np.int64(12), "numbers": np.array([4, 3])}, 1.0),
    ("<answer>3 * 4</answer>", {"target": np.float32(12.0), "numbers": (3, 4)}, 1.0),
    ("<answer>99**98**97</answer>", {"target": 1, "numbers": [99, 98, 97]}, 0.1),
]


@pytest.mark.parametrize("text,truth,expected", SCORE_CASES)
def test_compute_score_branches(text, truth, expected):
    got = compute_score(text, truth)
    assert got == expected and type(got) is type(expected)
    if "**98**" not in text:  # the reference would hang on the tower
        assert ref.compute_score(text, truth) == expected


def test_compute_score_custom_scores_and_method():
    assert compute_score("<answer>1+2</answer>", {"target": 3, "numbers": [1, 2]},
                         format_score=0.2, score=5.0) == 5.0
    assert compute_score("<answer>1+2</answer>", {"target": 4, "numbers": [1, 2]},
                         format_score=0.2, score=5.0) == 0.2
    with pytest.raises(ValueError, match="strict"):
        compute_score("<answer>1</answer>", {"target": 1, "numbers": [1]}, method="lenient")


def test_verify_equation_strict_is_score_equals_one_and_never_raises():
    assert verify_equation_strict("<answer>3*4</answer>", 12, [3, 4]) is True
    assert verify_equation_strict("<answer>3+4</answer>", 12, [3, 4]) is False
    assert verify_equation_strict("<answer>3*4</answer>", None, [3, 4]) is False
    assert verify_equation_strict(None, 12, [3, 4]) is False  # type: ignore[arg-type]


@pytest.mark.parametrize("gen,expected", [
    ("3*4</answer>", "<answer>3*4</answer>"),
    ("3*4", "<answer>3*4</answer>"),
    ("<answer>3*4</answer>", "<answer>3*4</answer>"),
    ("<answer>3*4", "<answer>3*4</answer>"),
])
def test_ensure_answer_tags(gen, expected):
    assert ensure_answer_tags(gen) == expected


@pytest.mark.timeout(10)
def test_long_but_valid_expressions_match_eval():
    padded = "1" + " " * (1 << 20) + "+2"  # long only in whitespace: eval finishes, so do we
    assert evaluate_equation(padded) == ref.evaluate_equation(padded) == 3
    deep_ok = "1+" * 2500 + "1"  # deep but within Python's compiler limits
    assert evaluate_equation(deep_ok) == ref.evaluate_equation(deep_ok) == 2501
    too_deep = "1+" * 3100 + "1"  # Python's compiler gives RecursionError: both None
    assert evaluate_equation(too_deep) is None and ref.evaluate_equation(too_deep) is None


@pytest.mark.parametrize("equation", ["١ + ٢", "1\u00a0+ 2", "1\x1c+2", "1\u2003+\u20032", "1 + ²",
                                      "1 + 2\x85", "1+2\u200b", "\x0c1+2", "1\x0b+2"])
def test_non_ascii_digits_and_spaces_follow_the_reference(equation):
    assert validate_equation(equation, [1, 2]) == ref.validate_equation(equation, [1, 2])
    got, want = evaluate_equation(equation), ref.evaluate_equation(equation)
    assert (type(got), got) == (type(want), want)
