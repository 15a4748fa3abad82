"""The model's own scores of its answers (`calibrl.algo.self_estimates`) against slow loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calibrl.algo.self_estimates import (
    agreement,
    answer_likelihood,
    held_out_binned_targets,
    mapped_targets,
)


def test_answer_likelihood_is_the_geometric_mean_token_probability():
    assert answer_likelihood([math.log(0.5), math.log(0.125)]) == pytest.approx(0.25)
    assert answer_likelihood([0.0]) == 1.0
    assert answer_likelihood([]) is None and answer_likelihood(None) is None
    assert answer_likelihood([float("nan"), -1.0]) is None
    assert answer_likelihood([-1e9]) == 0.0


def test_agreement_counts_the_other_answers_only():
    assert agreement(["a", "a", "b", None]) == [1 / 3, 1 / 3, 0.0, 0.0]
    assert agreement([None, None]) == [0.0, 0.0]  # no answer agrees with nothing
    assert agreement(["x"]) == [0.0]
    keys = ["1", "2", "1", "1", "3", "2"]
    slow = [sum(keys[j] == keys[i] for j in range(6) if j != i) / 5 for i in range(6)]
    assert agreement(keys) == slow


def test_mapped_targets_are_the_accuracy_of_answers_with_the_same_score():
    scores = [1.0, 1.0, 1.0, 1 / 3, 1 / 3, 0.0, 1.0, 0.0]
    correct = [True, True, False, False, True, False, True, False]
    got = mapped_targets(scores, correct)
    for score, target in zip(scores, got, strict=True):  # the slow way: a loop per answer
        same = [c for s, c in zip(scores, correct, strict=True) if s == score]
        assert target == pytest.approx(sum(same) / len(same))
    assert got[0] == 0.75 and got[3] == 0.5 and got[5] == 0.0
    assert sum(got) == pytest.approx(sum(correct))  # calibrated on the answers it is fitted on
    with pytest.raises(ValueError, match="3 scores for 2 grades"):
        mapped_targets([0.0, 1.0, 1.0], [True, False])


def _binned_loop(scores, correct, folds, bins):
    """The slow way: per answer, the other folds' answers sorted by score, cut into `bins`
    equal-count runs by the numpy quantile edges, and the share right in the answer's run."""
    out = []
    for s, f in zip(scores, folds, strict=True):
        others = [(t, c) for t, c, g in zip(scores, correct, folds, strict=True) if g != f]
        edges = [float(np.quantile([t for t, _ in others], q / bins)) for q in range(1, bins)]
        mine = sum(1 for e in edges if s >= e)
        same = [c for t, c in others if sum(1 for e in edges if t >= e) == mine]
        out.append(sum(same) / len(same) if same else sum(c for _, c in others) / len(others))
    return out


@pytest.mark.parametrize("bins", [1, 3, 10])
def test_held_out_binned_targets_match_a_loop_and_never_read_their_own_fold(bins):
    rng = np.random.default_rng(bins)
    scores = rng.random(60).round(2).tolist()  # ties on purpose
    correct = (rng.random(60) < np.asarray(scores)).tolist()
    folds = [i // 4 % 5 for i in range(60)]  # a prompt's 4 answers share a fold
    got = held_out_binned_targets(scores, correct, folds, bins=bins)
    assert got == pytest.approx(_binned_loop(scores, correct, folds, bins))
    flipped = [not c if f == 0 else c for c, f in zip(correct, folds, strict=True)]
    again = held_out_binned_targets(scores, flipped, folds, bins=bins)
    assert [a for a, f in zip(again, folds, strict=True) if f == 0] == pytest.approx(
        [g for g, f in zip(got, folds, strict=True) if f == 0])  # own grades never counted


def test_held_out_binned_targets_rank_by_score_when_the_score_says_it():
    scores = [0.1, 0.2, 0.8, 0.9] * 10
    correct = [False, False, True, True] * 10
    got = held_out_binned_targets(scores, correct, [i % 5 for i in range(40)], bins=2)
    assert got == [0.0, 0.0, 1.0, 1.0] * 10
    with pytest.raises(ValueError, match="two folds"):
        held_out_binned_targets(scores, correct, [0] * 40)
    with pytest.raises(ValueError, match="40 scores, 40 grades, 3 folds"):
        held_out_binned_targets(scores, correct, [0, 1, 2])
