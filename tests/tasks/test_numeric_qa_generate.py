"""Numeric QA word problems: deterministic by seed, distinct, difficulty = steps, worked steps
that add up, traces for the warm-up, and a tokenizer corpus that leaves Countdown's alone."""

from __future__ import annotations

import random
import re

import pytest

from calibrl.errors import UserError
from calibrl.models.corpus import tokenizer_corpus
from calibrl.tasks import get_task
from calibrl.tasks.numeric_qa.generate import MAX_VALUE, generate_word_problems
from calibrl.training.sft_data import SFTMix, build_conversations

QA = get_task("numeric_qa")
STEP = re.compile(r"(\d+) ([-+*]) (\d+) = (\d+)")


def test_same_seed_same_problems_other_seed_other_problems():
    assert QA.generate(30, seed=4, test_size=5) == QA.generate(30, seed=4, test_size=5)
    first = [e.ground_truth["question"] for e in QA.generate(30, seed=4, test_size=5)[0]]
    other = [e.ground_truth["question"] for e in QA.generate(30, seed=5, test_size=5)[0]]
    assert first != other


def test_test_split_is_stable_as_n_grows():
    small_train, small_test = generate_word_problems(20, seed=3, test_size=5)
    big_train, big_test = generate_word_problems(40, seed=3, test_size=5)
    assert big_test == small_test and big_train[:15] == small_train


def test_questions_are_distinct_across_splits():
    train, test = QA.generate(300, seed=0, num_steps=(1, 1), max_operand=5, test_size=50)
    keys = [QA.problem_key(e.ground_truth) for e in train + test]
    assert len(set(keys)) == len(keys) == 300


def test_running_out_of_distinct_problems_is_a_user_error():
    # 1 step, operands 1..1: 6 people x 8 things x (3 + 3 + 2) events, at most 384 questions
    with pytest.raises(UserError, match="ran out"):
        generate_word_problems(400, num_steps=(1, 1), max_operand=1, seed=0)


def test_difficulty_groups_are_the_number_of_steps():
    train, test = QA.generate(90, seed=1, num_steps=(1, 3), test_size=10)
    groups = {QA.difficulty(e.ground_truth) for e in train + test}
    assert groups == {"1 step", "2 steps", "3 steps"}
    for example in train + test:
        assert len(example.extra["steps"]) == example.ground_truth["num_steps"]


def test_worked_steps_chain_to_the_answer_and_stay_in_range():
    train, _ = QA.generate(200, seed=2, num_steps=(1, 4), max_operand=30, test_size=0)
    for example in train:
        value = None
        for step in example.extra["steps"]:
            a, op, b, result = STEP.fullmatch(step).groups()
            assert value is None or int(a) == value  # each step starts where the last ended
            value = {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op]
            assert value == int(result) and 0 <= value <= MAX_VALUE
        assert str(value) == example.ground_truth["answer"] == example.extra["solution"]
        assert example.ground_truth["question"] in example.messages[-1]["content"]


def test_prompt_styles():
    (example,), _ = QA.generate(1, seed=0, test_size=0, style="compact")
    assert example.messages == [{"role": "user", "content": example.ground_truth["question"]}]
    (example,), _ = QA.generate(1, seed=0, test_size=0)  # the default style instructs
    assert example.messages[-1]["content"].startswith(example.ground_truth["question"] + " ")
    with pytest.raises(UserError, match="prompt style"):
        QA.make_prompt(example.ground_truth, "tinyzero")


@pytest.mark.parametrize("options, message", [
    ({"num_steps": (0, 2)}, "num_steps"), ({"num_steps": (3, 2)}, "num_steps"),
    ({"max_operand": 0}, "max_operand"), ({"test_size": 11}, "test size"),
])
def test_bad_generation_options_are_user_errors(options, message):
    with pytest.raises(UserError, match=message):
        QA.generate(10, seed=0, **options)


def test_reference_traces_verify_and_wrong_traces_do_not():
    train, _ = QA.generate(60, seed=3, num_steps=(1, 3), test_size=0)
    rng = random.Random(0)
    for example in train:
        right = QA.reference_trace(example)
        wrong = QA.wrong_trace(example, rng)
        assert QA.verify(right, example.ground_truth)
        assert wrong is not None and not QA.verify(wrong, example.ground_truth)
        # one slip, carried on: the same number of steps, each still "a op b = v"
        assert wrong.count("\n") == right.count("\n")


def test_sft_conversations_are_built_from_numeric_qa_examples():
    train, _ = QA.generate(40, seed=0, test_size=0, style="compact")
    conversations = build_conversations(train, SFTMix(), random.Random(0))
    assert len(conversations) == 40
    assert {c.kind for c in conversations} == {"answer", "confidence", "rlcr"}
    assert any(c.context_correct is False for c in conversations)


def test_corpus_is_the_task_s_and_countdown_s_is_unchanged():
    countdown = tokenizer_corpus()
    assert tokenizer_corpus(task="countdown") == countdown
    numeric = tokenizer_corpus(task="numeric_qa")
    assert numeric == tokenizer_corpus(task="numeric_qa")  # deterministic
    assert any("How many apples does Tom have now?" in text for text in numeric)
    assert not any("apples" in text for text in countdown)
    with pytest.raises(UserError, match="unknown data_source"):
        tokenizer_corpus(task="no_such_task")
