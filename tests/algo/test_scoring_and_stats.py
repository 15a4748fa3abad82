"""Rewards written into a tree per mode, and the logging statistics computed from it."""

import math

import pytest

from algo.helpers import make_sample, two_turn_tree
from calibrl.algo.rollout_tree import AnswerNode, PromptNode, RolloutTree, Sample
from calibrl.algo.scoring import score_tree
from calibrl.algo.stats import confidence_histogram, histogram_values, rollout_stats
from calibrl.errors import UserError

GT = {"target": 3, "numbers": [1, 2]}
RIGHT = "<think> 1 + 2 = 3 </think>\n<answer>1 + 2</answer>"
WRONG = "<think> hmm </think>\n<answer>2 - 1</answer>"


def sample(text, n_tokens=3, finish="stop"):
    return Sample(context_ids=[1], token_ids=list(range(n_tokens)), text=text, finish_reason=finish)


def test_two_turn_scoring():
    answers = [
        AnswerNode(
            sample(RIGHT),
            confidences=[
                sample("<confidence>0.8</confidence>"),
                sample("<confidence>1</confidence>"),
            ],
        ),
        AnswerNode(
            sample(WRONG), confidences=[sample("<confidence>0.8</confidence>"), sample("no idea")]
        ),
    ]
    tree = score_tree(RolloutTree("two_turn", [PromptNode(0, "countdown", GT, answers)]))
    assert [a.correct for a in answers] == [True, False]
    assert [a.sample.reward for a in answers] == [1.0, 0.0]
    assert [c.reward for c in answers[0].confidences] == pytest.approx([0.96, 1.0])
    assert [c.reward for c in answers[1].confidences] == pytest.approx([0.36, 0.0])
    assert tree is not None


def test_rlcr_and_rlvr_scoring_and_a_raising_verifier():
    rlcr_text = RIGHT + "<analysis> checked </analysis><confidence>0.5</confidence>"
    tree = score_tree(
        RolloutTree("rlcr", [PromptNode(0, "countdown", GT, [AnswerNode(sample(rlcr_text))])])
    )
    assert tree.prompts[0].answers[0].sample.reward == pytest.approx(1 + 0.75)
    tree = score_tree(
        RolloutTree("rlvr", [PromptNode(0, "countdown", GT, [AnswerNode(sample(RIGHT))])])
    )
    assert tree.prompts[0].answers[0].sample.reward == 1.0

    def boom(text, source, gt):
        raise RuntimeError("verifier crashed")

    tree = score_tree(
        RolloutTree("rlvr", [PromptNode(0, "countdown", GT, [AnswerNode(sample(RIGHT))])]), boom
    )
    assert tree.prompts[0].answers[0].correct is False


def test_rollout_stats_by_hand(byte_tok):
    tree = two_turn_tree(byte_tok)
    tree.prompts[0].answers[0].confidences[0].finish_reason = "length"
    stats = rollout_stats(tree)
    answer_rewards = [1.0, 0.0, 1.0]
    mean = sum(answer_rewards) / 3
    assert stats["answer/count"] == 3 and stats["confidence/count"] == 7
    assert stats["answer/reward_mean"] == pytest.approx(mean)
    assert stats["answer/reward_std"] == pytest.approx(
        math.sqrt(sum((r - mean) ** 2 for r in answer_rewards) / 3)
    )
    assert stats["answer/accuracy"] == pytest.approx(2 / 3)
    # prompt 0 has rewards {1, 0}; prompt 1 one answer: zero spread
    assert stats["answer/zero_spread_frac"] == pytest.approx(1 / 2)
    # answers' confidence rewards: {0.96, 0.36}, {1, 0}, {0, 0.75, 0.75}: none without spread
    assert stats["confidence/zero_spread_frac"] == 0.0
    assert stats["confidence/truncated_frac"] == pytest.approx(1 / 7)
    lengths = [len(c.token_ids) for p in tree.prompts for a in p.answers for c in a.confidences]
    assert stats["confidence/length_mean"] == pytest.approx(sum(lengths) / 7)
    assert stats["confidence/length_max"] == max(lengths)
    # confidences are written as 0.0, 0.1, 0.2 in the helper
    assert stats["calibration/parse_fail_frac"] == 0.0
    values = histogram_values(tree)
    assert sorted(values["calibration/confidence"]) == pytest.approx(
        [0.0, 0.0, 0.0, 0.1, 0.1, 0.1, 0.2]
    )
    assert values["answer/reward"] == answer_rewards
    assert len(values["confidence/reward"]) == 7


def test_stats_for_single_turn_modes(byte_tok):
    answers = [
        AnswerNode(
            make_sample(byte_tok, "q", "<answer>1</answer><confidence>0.9</confidence>", 1.0), True
        ),
        AnswerNode(
            make_sample(byte_tok, "q", "<answer>1</answer><confidence>oops</confidence>", 1.0), True
        ),
    ]
    stats = rollout_stats(RolloutTree("rlcr", [PromptNode(0, "countdown", GT, answers)]))
    assert stats["answer/zero_spread_frac"] == 1.0
    assert stats["calibration/parse_fail_frac"] == 0.5
    assert stats["calibration/brier"] == pytest.approx(0.01)
    assert "confidence/count" not in stats
    rlvr = rollout_stats(RolloutTree("rlvr", [PromptNode(0, "countdown", GT, answers)]))
    assert not any(k.startswith("calibration/") for k in rlvr)
    assert rollout_stats(RolloutTree("two_turn", []))["answer/reward_mean"] == 0.0


def test_confidence_histogram():
    counts, edges = confidence_histogram([0.0, 0.05, 0.1, 0.3, 0.7, 0.99, 1.0, 1.5, -0.1], bins=10)
    assert edges[0] == 0.0 and edges[-1] == 1.0 and len(edges) == 11
    assert counts == [2, 1, 0, 1, 0, 0, 0, 1, 0, 2]
    assert confidence_histogram([0.5], bins=1) == ([1], [0.0, 1.0])
    with pytest.raises(ValueError):
        confidence_histogram([], bins=0)


def test_verifier_sees_the_completion_up_to_its_answer():
    # the Countdown extractor reads only the last line: text after </answer> must not hide it
    rlcr_text = RIGHT + "\n<analysis> checked </analysis>\n<confidence>0.9</confidence>"
    tree = RolloutTree("rlcr", [PromptNode(0, "countdown", GT, [AnswerNode(sample(rlcr_text))])])
    assert score_tree(tree).prompts[0].answers[0].correct is True
    tree = RolloutTree("rlvr", [PromptNode(0, "countdown", GT, [AnswerNode(sample(RIGHT + "\n"))])])
    assert score_tree(tree).prompts[0].answers[0].correct is True


def test_unknown_data_source_is_a_user_error_not_a_wrong_answer():
    tree = RolloutTree("rlvr", [PromptNode(0, "no-such-task", GT, [AnswerNode(sample(RIGHT))])])
    with pytest.raises(UserError):
        score_tree(tree)
