"""The verifier's bounds: what it refuses, that it refuses cheaply, and that it refuses nothing else.

Issue 13: `1//64**(99*99)` was refused although its exact value is cheap (a 58,807-bit power), and
1 MB answers took 30-250 ms. The spec's semantics are Python's `eval` (the reference oracle);
every value below is what `eval` gives, and the refusals are the stated bounds of `safe_eval`.
"""

import ast
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrl.tasks.countdown import compute_score, evaluate_equation, safe_eval
from calibrl.tasks.countdown.safe_eval import MAX_INT_BITS, MAX_NONSPACE_CHARS, safe_evaluate
from reference import countdown_eval as ref


def test_small_result_through_a_large_but_bounded_power_is_scored_like_eval():
    # 64**9801 == 2**58806: 58,807 bits, under MAX_INT_BITS, so eval's value 0 is the spec's.
    assert evaluate_equation("1//64**(99*99)") == 0 == ref.evaluate_equation("1//64**(99*99)")
    truth = {"target": 0, "numbers": [1, 64, 99, 99]}
    text = "Assistant: <answer>1//64**(99*99)</answer>"
    assert compute_score(text, truth) == 1.0 == ref.compute_score(text, truth)


@pytest.mark.parametrize("equation,bits", [
    ("2**65535", MAX_INT_BITS),  # exactly at the bound
    ("2**32768*2**32767", MAX_INT_BITS),
    ("(-2)**65535", MAX_INT_BITS),
    ("3**41348", MAX_INT_BITS),  # floor(41348 * log2 3) + 1
    ("64**10922", 65533),
])
def test_results_up_to_the_bound_are_computed(equation, bits):
    got = evaluate_equation(equation)
    assert got == ref.evaluate_equation(equation) and got.bit_length() == bits


@pytest.mark.parametrize("equation", [
    "2**65536",  # one bit over
    "2**32768*2**32768",
    "3**41349",  # 65,538 bits
    "3**41346*3**1000",  # 67,117 bits
    "64**10923",  # 65,539 bits
])
def test_results_over_the_bound_are_refused(equation):
    assert evaluate_equation(equation) is None


def test_total_bits_bound_refuses_long_chains_of_big_results():
    near = "2**60000"  # ~60,000 bits each; 18 of them exceed MAX_TOTAL_BITS (2**20)
    assert evaluate_equation("+".join([near] * 8)) == 8 * 2**60000
    assert evaluate_equation("+".join([near] * 18)) is None


def test_oversized_powers_are_refused_before_any_big_int_work(monkeypatch):
    calls = []
    real_pow = safe_eval._BINOPS[ast.Pow]

    def spy(a, b):
        calls.append((a, b))
        return real_pow(a, b)

    monkeypatch.setitem(safe_eval._BINOPS, ast.Pow, spy)
    assert evaluate_equation("2**99**99") is None
    assert calls == [(99, 99)]  # 2**(99**99) was refused from its operands' sizes
    calls.clear()
    assert evaluate_equation("(10**5000)**14") is None
    assert calls == [(10, 5000)]


def test_oversized_input_is_refused_before_parsing(monkeypatch):
    parsed = []
    real_parse = ast.parse
    monkeypatch.setattr(safe_eval.ast, "parse", lambda src, **kw: parsed.append(src)
                        or real_parse(src, **kw))
    assert safe_evaluate("1+" + "-" * MAX_NONSPACE_CHARS + "2") is None
    assert safe_evaluate("- " * (1 << 19) + "1+2") is None
    assert parsed == []
    # Long only in blanks: parsed, but from a short source.
    assert safe_evaluate("1" + " " * (1 << 20) + "+2") == 3
    assert len(parsed) == 1 and len(parsed[0]) < 10


def _value_or_none(source, *, as_eval=True):
    """eval's value (eval strips leading spaces and tabs; compile, which safe_evaluate mirrors
    after its own strip, does not), or None on any error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "'int' object is not callable" etc.
        try:
            code = source if as_eval else compile(source, "<s>", "eval")
            return eval(code, {"__builtins__": None}, {})
        except Exception:
            return None


blank_run = st.text(alphabet=" \t\x0c\n\r", min_size=1, max_size=6)
token = st.sampled_from(["1", "2", "+", "-", "*", "(", ")", ".5", "()"])
spaced = st.tuples(st.sampled_from(["", " ", "\t", "\x0c"]),
                   st.lists(st.one_of(token, blank_run), max_size=12)).map(
    lambda t: t[0] + "".join(t[1]))


@settings(max_examples=400)
@given(spaced)
def test_shortened_blanks_tokenize_the_same_way(source):
    # The claim _shorten_blanks rests on: the value (or failure) is eval's either way.
    shortened = safe_eval._shorten_blanks(source.lstrip(" \t"))
    assert repr(_value_or_none(source)) == repr(_value_or_none(shortened, as_eval=False))


@pytest.mark.parametrize("equation", [
    "(1" + "\r\n \x0c" * 4000 + "+2)",
    "\x0c" + " " * 20000 + "1+2",  # indented first line: eval fails
    " " * 20000 + "\x0c1+2",  # eval strips the spaces; a form feed alone does not indent
    "\n" + "\x0c" * 20000 + "1+2",
    "\n" + "\t" * 20000 + "1+2",  # indented second line
    "1+2" + "\n \t" * 10000,  # trailing blank lines
    "1" + "\n" * 20000 + "+2",  # a line break outside brackets ends the expression
])
def test_long_blank_runs_evaluate_like_eval(equation):
    got, want = evaluate_equation(equation), ref.evaluate_equation(equation)
    assert (type(got), got) == (type(want), want)


unicode_soup = st.text(alphabet="12+-*/(). \t\n\u0661\u0662\u00a0\u2003\x85\u3000", max_size=20)


@given(unicode_soup)
def test_non_ascii_equations_are_none_like_eval(equation):
    got, want = evaluate_equation(equation), ref.evaluate_equation(equation)
    assert (type(got), got) == (type(want), want)


def test_non_ascii_equation_scores_format_score_even_with_the_right_numbers():
    truth = {"target": 3, "numbers": [1, 2]}
    for text in ["<answer>\u0661 + \u0662</answer>", "<answer>1\u00a0+ 2</answer>"]:
        assert compute_score(text, truth) == 0.1 == ref.compute_score(text, truth)


@pytest.mark.parametrize("text,expected", [
    ("<answer>1</answer>" * 60000 + "<answer>1+2</answer>", "1+2"),
    ("<answer>1</answer></answer><answer>x", "1"),
    ("</answer><answer>a<answer>b</answer>c</answer>", "a<answer>b"),
    ("<answer>a</answer>x<answer><answer>b</answer>", "<answer>b"),
])
def test_last_answer_found_from_the_end_matches_the_regex(text, expected):
    from calibrl.tasks.countdown import extract_solution

    assert extract_solution(text) == expected == ref.extract_solution(text)
