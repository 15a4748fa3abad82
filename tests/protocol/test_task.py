"""The Task interface: `verify` never raises, defaults of a minimal task, Countdown through the
registry, and the nesting of the wall-clock limit `verify` runs under."""

from __future__ import annotations

import random
import signal
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibrl.errors import UserError
from calibrl.protocol.completions import last_answer
from calibrl.tasks import Task, get_task, register_task, safe_verify
from calibrl.utils.timeout import can_enforce, time_limit

junk_text = st.one_of(st.text(max_size=200), st.binary(max_size=50).map(repr),
                      st.just("<answer>" + "9" * 5000 + "</answer>"),
                      st.just("<answer>" + "(" * 500 + "1" + ")" * 500 + "</answer>"))
junk_truth = st.one_of(
    st.none(), st.integers(), st.text(max_size=10),
    st.fixed_dictionaries({"target": st.one_of(st.integers(), st.text(max_size=5), st.none()),
                           "numbers": st.one_of(st.lists(st.integers(), max_size=5),
                                                st.text(max_size=5), st.none())}),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(junk_text, junk_truth)
def test_countdown_verify_never_raises_on_junk(text, ground_truth):
    assert get_task("countdown").verify(text, ground_truth) in (True, False)


class Minimal(Task):
    """Only what a task must implement; its check raises or hangs on request."""

    name = "test_minimal"

    def make_prompt(self, ground_truth, style=None):
        return [{"role": "user", "content": f"Say {ground_truth['word']}."}]

    def check(self, answer_text, ground_truth):
        if "boom" in answer_text:
            raise RuntimeError("verifier bug")
        if "hang" in answer_text:
            while True:
                pass
        return self.extract_answer(answer_text) == ground_truth["word"]

    def score(self, solution_str, ground_truth):
        return float(self.verify(solution_str, ground_truth))


def test_verify_turns_exceptions_and_timeouts_into_wrong():
    task = Minimal()
    task.verify_timeout_s = 0.2
    assert task.verify("<answer> hi </answer>", {"word": "hi"}) is True
    assert task.verify("<answer>boom</answer>", {"word": "boom"}) is False
    assert task.verify("<answer>hi</answer>", {}) is False  # KeyError in check
    if can_enforce():
        start = time.monotonic()
        assert task.verify("<answer>hang</answer>", {"word": "hang"}) is False
        assert time.monotonic() - start < 5
    assert safe_verify(lambda text, gt: 1 / 0, "x", {}) is False


def test_defaults_of_a_minimal_task():
    task = Minimal()
    assert task.extract_answer("<answer>a</answer> then <answer> b </answer>") == "b"
    assert task.extract_answer("<answer>unclosed") is None and last_answer("</answer>") is None
    assert task.difficulty({"word": "x"}) == "all"
    assert task.problem_key({"b": 1, "a": 2}) == task.problem_key({"a": 2, "b": 1})
    assert task.check_ground_truth({"word": "x"}) == {"word": "x"}
    with pytest.raises(UserError, match="expected a mapping"):
        task.check_ground_truth(["x"])
    with pytest.raises(UserError, match="cannot generate"):
        task.generate(3)
    with pytest.raises(UserError, match="cannot convert"):
        task.convert_file("x.parquet")
    assert task.reference_trace(None) is None and task.wrong_trace(None, random.Random(0)) is None
    assert task.corpus_texts(random.Random(0)) == []


def test_the_registry_takes_tasks_only():
    with pytest.raises(TypeError, match="not a calibrl.tasks.Task"):
        register_task(object())  # type: ignore[arg-type]
    with pytest.raises(UserError, match="unknown data_source 'nope'; known: .*countdown"):
        get_task("nope")


def test_countdown_through_the_interface():
    task = get_task("countdown")
    assert get_task("countdown_3to4") is task
    train, test = task.generate(12, seed=0, test_size=2, style="compact", max_number=20)
    assert (len(train), len(test)) == (10, 2)
    example = train[0]
    assert example.messages == task.make_prompt(example.ground_truth, "compact")
    trace = task.reference_trace(example)
    assert task.verify(trace, example.ground_truth)
    assert task.extract_answer(trace) == example.extra["solution"]
    wrong = task.wrong_trace(example, random.Random(0))
    assert wrong is not None and not task.verify(wrong, example.ground_truth)
    numbers = example.ground_truth["numbers"]
    shuffled = {"target": example.ground_truth["target"], "numbers": numbers[::-1]}
    assert task.problem_key(shuffled) == task.problem_key(example.ground_truth)
    assert task.difficulty(example.ground_truth) == f"{len(numbers)} numbers"
    with pytest.raises(UserError, match="unknown prompt style 'loud'"):
        task.make_prompt(example.ground_truth, "loud")
    with pytest.raises(UserError, match="numbers is empty"):
        task.check_ground_truth({"target": 1, "numbers": []})
    assert task.corpus_texts(random.Random(3)) == task.corpus_texts(random.Random(3))


@pytest.mark.skipif(not can_enforce(), reason="needs SIGALRM in the main thread")
def test_an_inner_time_limit_puts_the_outer_one_back():
    with time_limit(30):
        with time_limit(0.5):
            pass
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 25 < left <= 30
