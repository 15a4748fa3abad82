"""The math task: math-verify's equivalences through the task (fractions and decimals, roots,
intervals, sets), the answer found in the last answer block or else the last `\\boxed{}`,
hostile text that never raises, GSM8K and MATH rows written locally in their public field names
converted and round-tripped through the verl schema, and the one-line error without the extra."""

from __future__ import annotations

import builtins
import json

import pyarrow.parquet as pq
import pytest

from calibrl.data import TaskExample
from calibrl.errors import UserError
from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples, write_examples
from calibrl.tasks.math_task import MISSING_EXTRA, extract_math_answer, last_boxed

pytest.importorskip("math_verify")

MATH = get_task("math")
GSM8K = [{"question": f"Natalia sold {48 + i} clips in April and half as many in May. How "
                      "many clips did she sell altogether?",
          "answer": f"In May she sold {48 + i}/2 clips.\nAltogether {48 + i} + ... \n"
                    f"#### {(48 + i) * 3 // 2:,}"} for i in range(0, 2000, 500)]
MATH_ROWS = [
    {"problem": "What is $\\frac{1}{2} + \\frac{1}{4}$?",
     "solution": "We get $\\frac{2}{4} + \\frac{1}{4} = \\boxed{\\frac{3}{4}}$.",
     "level": "Level 2", "type": "Prealgebra"},
    {"problem": "Solve $x^2 - 2 = 0$ for $x > 0$.",
     "solution": "So $x = \\boxed{\\sqrt{2}}$.", "level": "Level 1", "type": "Algebra"},
    {"problem": "For which $x$ is $\\sqrt{x - 1}$ defined?",
     "solution": "Need $x \\ge 1$: $\\boxed{[1, \\infty)}$.", "level": "Level 3",
     "type": "Algebra"},
    {"problem": "Which integers $n$ satisfy $n^2 = n$?",
     "solution": "First $n(n-1)=0$, so $\\boxed{\\{0, 1\\}}$.", "level": "Level 4",
     "type": "Number Theory"},
]


def gt(answer, question="q"):
    return MATH.check_ground_truth({"question": question, "answer": answer})


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(("reference", "given"), [
    ("\\frac{1}{2}", "0.5"),
    ("0.5", "\\frac{1}{2}"),
    ("\\frac{1}{2}", "1/2"),
    ("\\sqrt{2}", "2^{1/2}"),
    ("(1, 3]", "(1,3]"),
    ("[1, \\infty)", "[1,\\infty)"),
    ("\\{1, 2, 3\\}", "\\{3, 2, 1\\}"),
    ("72", "72.0"),
    ("72", "$72$"),
])
def test_latex_and_plain_forms_agree(reference, given):
    assert MATH.verify(f"<answer>{given}</answer>", gt(reference))
    assert MATH.score(f"<think>x</think><answer>{given}</answer>", gt(reference)) == 1.0


@pytest.mark.parametrize(("reference", "given"), [
    ("\\frac{1}{2}", "0.4"),
    ("\\sqrt{2}", "2"),
    ("(1, 3]", "[1, 3]"),
    ("\\{1, 2\\}", "\\{1, 3\\}"),
    ("72", "73"),
])
def test_different_answers_get_the_format_score(reference, given):
    assert not MATH.verify(f"<answer>{given}</answer>", gt(reference))
    assert MATH.score(f"<answer>{given}</answer>", gt(reference)) == MATH.format_score


@pytest.mark.parametrize(("text", "boxed"), [
    ("so \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
    ("\\boxed{1} then \\boxed{2}", "2"),
    ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),
    ("\\boxed{x^{2^{3}}} and {braces}", "x^{2^{3}}"),
    ("\\boxed {7}", "7"),
    ("\\boxed{3} then \\boxed{unclosed", "3"),
    ("\\boxed{\\boxed{5}}", "5"),
    ("no box", None),
    ("\\boxed{", None),
    ("\\boxed}", None),
])
def test_boxed_extraction_is_brace_balanced(text, boxed):
    assert last_boxed(text) == boxed


def test_answer_block_comes_before_boxed():
    assert extract_math_answer("\\boxed{1} <answer>2</answer> \\boxed{3}") == "2"
    assert extract_math_answer("<answer>\\boxed{4}</answer>") == "4"
    assert extract_math_answer("thinking... \\boxed{5}") == "5"
    assert MATH.score("\\boxed{1} <answer>2</answer>", gt("2")) == 1.0
    assert MATH.score("\\boxed{1} <answer>3</answer>", gt("1")) == MATH.format_score
    assert MATH.score("the answer is \\boxed{0.5}", gt("\\frac{1}{2}")) == 1.0
    assert MATH.score("the answer is 0.5", gt("\\frac{1}{2}")) == 0.0


@pytest.mark.parametrize("text", [
    "",
    "<answer></answer>",
    "<answer>" + "9" * 200_000 + "</answer>",
    "\\boxed{" * 50_000,
    "}" * 50_000 + "\\boxed{1",
    "<answer>" + "(" * 5000 + "</answer>",
    "<answer>\\frac{\\frac{\\frac{</answer>",
    "<answer>\x00\xff\ud800 \\\\ $$ $</answer>",
    "<answer><answer>1</answer></answer>",
    "<answer>\\boxed{\\boxed{}</answer>",
    "<answer>10^{10^{10^{10}}}</answer>",
    "<answer>9^{999999999}</answer>",
    "<answer>(10^{7})!</answer>",
    "<answer>10000000!</answer>",
    "\\boxed{2^{2^{40}}}",
    "x" * 1_000_000,
])
def test_hostile_answers_never_raise(text):
    assert MATH.score(text, gt("1")) in (0.0, MATH.format_score, MATH.correct_score)
    assert isinstance(MATH.verify(text, gt("1")), bool)


def test_non_text_never_raises():
    for value in (None, 3, b"<answer>1</answer>", ["<answer>1</answer>"]):
        assert MATH.verify(value, gt("1")) is False
        assert extract_math_answer(value) is None


def test_gsm8k_rows_convert(tmp_path):
    result = MATH.convert_file(write_jsonl(tmp_path / "gsm8k.jsonl", GSM8K), test_size=1)
    assert result.rows_read == 4 and result.duplicates == 0
    first = result.test[0].ground_truth
    assert first == {"question": GSM8K[0]["question"], "answer": "72", "difficulty": None}
    assert result.train[-1].ground_truth["answer"] == "2322"  # "2,322" without the separator
    assert MATH.difficulty(first) == "all"
    assert MATH.verify("<answer>72</answer>", first)
    example = result.train[0]
    assert example.data_source == "math" and example.extra == {"solution": "822"}
    assert MATH.verify(MATH.reference_trace(example), example.ground_truth)


def test_math_rows_convert(tmp_path):
    result = MATH.convert_file(write_jsonl(tmp_path / "math.jsonl", MATH_ROWS), test_size=0)
    answers = [e.ground_truth["answer"] for e in result.train]
    assert answers == ["\\frac{3}{4}", "\\sqrt{2}", "[1, \\infty)", "\\{0, 1\\}"]
    assert [MATH.difficulty(e.ground_truth) for e in result.train] == [
        "Level 2", "Level 1", "Level 3", "Level 4"]
    for example, given in zip(result.train, ("0.75", "2^{1/2}", "[1,\\infty)", "\\{1,0\\}"),
                              strict=True):
        assert MATH.verify(f"<answer>{given}</answer>", example.ground_truth)
    assert "<answer>" in MATH.make_prompt(result.train[0].ground_truth)[0]["content"]
    assert MATH.make_prompt(result.train[0].ground_truth, "compact")[0]["content"] == \
        MATH_ROWS[0]["problem"]


def test_conversions_round_trip_through_the_verl_schema(tmp_path):
    examples = []
    for name, rows in (("g", GSM8K), ("m", MATH_ROWS)):
        examples += MATH.convert_file(write_jsonl(tmp_path / f"{name}.jsonl", rows),
                                      test_size=0).train
    examples = [TaskExample(e.data_source, e.messages, e.ground_truth, i, e.split, e.extra,
                            e.ability) for i, e in enumerate(examples)]
    path = write_examples(tmp_path / "out.parquet", examples)
    assert pq.read_schema(path) == MATH.arrow_schema()
    assert load_examples(path) == examples
    row = pq.read_table(path).to_pylist()[-1]
    assert row["reward_model"]["ground_truth"] == {
        "question": MATH_ROWS[-1]["problem"], "answer": "\\{0, 1\\}", "difficulty": "Level 4"}
    assert row["extra_info"]["solution"] == "\\{0, 1\\}"
    assert write_examples(tmp_path / "again.parquet", load_examples(path)).read_bytes() == \
        path.read_bytes()


@pytest.mark.parametrize(("row", "message"), [
    ({"answer": "1"}, "missing 'question'"),
    ({"question": "q"}, "missing 'answer'"),
    ({"question": "q", "answer": "no mark"}, None),
    ({"problem": "p", "solution": "no box here"}, "has no \\boxed"),
    ({"question": "q", "answer": "#### "}, "non-empty string"),
    ({"question": " ", "answer": "1"}, "non-empty string"),
])
def test_malformed_rows_are_user_errors(tmp_path, row, message):
    path = write_jsonl(tmp_path / "bad.jsonl", [row])
    if message is None:  # a plain {question, answer} row: the answer is taken as it is
        assert MATH.convert_file(path, test_size=0).train[0].ground_truth["answer"] == "no mark"
        return
    with pytest.raises(UserError, match=message.replace("\\", "\\\\")):
        MATH.convert_file(path, test_size=0)


def test_missing_extra_is_one_readable_line(monkeypatch):
    real_import = builtins.__import__

    def no_math_verify(name, *args, **kwargs):
        if name == "math_verify" or name.startswith("math_verify."):
            raise ImportError("No module named 'math_verify'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_math_verify)
    for name in [m for m in __import__("sys").modules if m.startswith("math_verify")]:
        monkeypatch.delitem(__import__("sys").modules, name)
    with pytest.raises(UserError) as err:
        MATH.score("<answer>1</answer>", gt("1"))
    assert str(err.value) == MISSING_EXTRA
    assert "\n" not in str(err.value)
    with pytest.raises(UserError, match="pip install 'calibrl\\[math\\]'"):
        MATH.verify("<answer>1</answer>", gt("1"))
    get_task("math")  # looking the task up, or converting, needs no extra
