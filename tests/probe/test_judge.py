"""The probe judges answers with the training reward's verifier: they cannot drift apart."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calibrl.algo import score_tree
from calibrl.algo.rollout_tree import AnswerNode, PromptNode, RolloutTree, Sample
from calibrl.probe.judge import (
    judge,
    judge_completion,
    normalise_answer,
    sampled_answer,
    solution_str,
)
from calibrl.rewards.calibration import accuracy_reward
from calibrl.settings.probe import FORCED_TEXT
from calibrl.tasks import get_task
from calibrl.tasks.countdown import compute_score, verify_equation_strict

GT = {"target": 1, "numbers": [20, 14, 6]}
CHAIN = "<think>\n14 + 6 = 20\n20 / 20 = 1\n"
PIECES = ["<answer>", "</answer>", "\n", " ", "(", ")", "+", "-", "*", "/", "**", ".", "20",
          "14", "6", "1", "x", "Assistant:", "<|im_start|>assistant", "</think>",
          "20 / (14 + 6)", "(20 - 14) / 6", "20 - 14 - 6"]
texts = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)
RIGHT = ["20 / (14 + 6)</answer>", " 20/(14+6) </answer>", "20 / (14 + 6)",
         "(20 - 14) / 6</answer>\n", "20 / (14 + 6)</answer>junk", "6 / (20 - 14)</answer>",
         "<answer>20 / (14 + 6)</answer>"]
WRONG = ["20 / (14 + 6)\n</answer>", "", "</answer>", "x</answer>", "20 ** 0</answer>",
         "20 - 14 - 6</answer>", "20 / 14 + 6</answer>", "20 / (14 + 6) + 1</answer>"]
EXAMPLES = RIGHT + WRONG


def training_correct(text: str) -> bool:
    """What RL training records for a completion `text` (rollout tree -> score_tree)."""
    sample = Sample(context_ids=[1], token_ids=[1], text=text)
    tree = RolloutTree(mode="rlvr", prompts=[
        PromptNode(index=0, data_source="countdown", ground_truth=GT,
                   answers=[AnswerNode(sample)])])
    return bool(score_tree(tree).prompts[0].answers[0].correct)


def check_agreement(gen_text: str) -> bool:
    sol = solution_str(gen_text)
    verdict = judge(gen_text, GT)
    assert verdict == verify_equation_strict(sol, GT["target"], GT["numbers"])
    assert verdict == (compute_score(sol, GT) == 1.0)
    assert verdict == get_task("countdown").verify(sol, GT)
    assert verdict == (accuracy_reward(sol, GT, "countdown") == 1.0)
    assert verdict == training_correct(sol)
    return verdict


@pytest.mark.parametrize("gen_text", EXAMPLES)
def test_probe_and_training_agree_on_examples(gen_text):
    check_agreement(gen_text)


def test_examples_cover_both_verdicts():
    assert all(check_agreement(t) for t in RIGHT)
    assert not any(check_agreement(t) for t in WRONG)


@given(texts)
def test_probe_and_training_agree_on_any_text(gen_text):
    check_agreement(gen_text)


# Pieces that keep a sample on one line, without tags or markers of its own.
INLINE = [p for p in PIECES if p not in ("\n", "<answer>", "Assistant:", "<|im_start|>assistant")]
inline_texts = st.lists(st.sampled_from(INLINE), max_size=8).map("".join)


@given(st.tuples(inline_texts, inline_texts).map(lambda ab: ab[0] + "</answer>" + ab[1]))
def test_probe_on_the_answer_alone_equals_training_on_the_whole_completion(gen_text):
    """A sample that stopped at `</answer>` and stays on its line (what the probe samples):
    judging it alone is judging chain + forced text + it, as training judges a completion."""
    assert judge(gen_text, GT) == training_correct(CHAIN + FORCED_TEXT + gen_text)
    assert judge(gen_text, GT) == judge_completion(CHAIN + FORCED_TEXT + gen_text, GT)


def test_judge_completion_adds_no_tags():
    assert not judge_completion("20 / (14 + 6)", GT)  # the model wrote no answer tags
    assert judge("20 / (14 + 6)", GT)  # after the forced `<answer>` it needs none
    assert judge_completion(CHAIN + "</think>\n<answer>20 / (14 + 6)</answer>", GT)


def test_same_answer_ignores_whitespace_only():
    assert sampled_answer(" 20/( 14+6 ) </answer>") == normalise_answer("20 / (14 + 6)")
    assert sampled_answer("(20 - 14) / 6</answer>") != normalise_answer("20 / (14 + 6)")
    assert sampled_answer("</answer>") is None and normalise_answer("  ") is None


def test_judge_never_raises_on_hostile_text():
    for text in ["9" * 5000 + "</answer>", "2 ** 99 ** 99</answer>", "\x00</answer>", "(" * 500]:
        assert judge(text, GT) is False
