"""The baselines a stated confidence must beat, against slow obvious references."""

from __future__ import annotations

import numpy as np
import pytest

from calibrl.evaluation.baselines import (
    TABLE_FOLDS,
    baseline_metrics,
    difficulty_table_confidences,
    within_group_auroc,
)
from calibrl.evaluation.metrics import brier_score
from evaluation.slow_references import pairwise_auroc, pairwise_within_group_auroc


def _random_eval(seed: int, problems: int = 60, answers: int = 3):
    rng = np.random.default_rng(seed)
    clusters = np.repeat(np.arange(problems) * 7 % 101, answers).tolist()  # unsorted ids
    groups = [f"{2 + c % 3} numbers" for c in clusters]
    scores = np.round(rng.uniform(0, 1, problems * answers), 1)
    correct = rng.uniform(0, 1, scores.size) < np.where(
        np.array([g.startswith("2") for g in groups]), 0.8, 0.2) * (0.5 + scores / 2)
    return scores, correct, groups, clusters


def _table_reference(correct, groups, clusters, folds):
    """Fold k = position of the problem's first appearance mod folds; an answer's value is
    the mean correctness of the same group's answers in other folds."""
    order = []
    for c in clusters:
        if c not in order:
            order.append(c)
    fold = [order.index(c) % folds for c in clusters]
    out = []
    for i in range(len(correct)):
        same = [correct[j] for j in range(len(correct))
                if fold[j] != fold[i] and groups[j] == groups[i]]
        other = [correct[j] for j in range(len(correct)) if fold[j] != fold[i]]
        out.append(sum(same) / len(same) if same else sum(other) / len(other))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_within_group_auroc_matches_pair_counting(seed):
    scores, correct, groups, _ = _random_eval(seed)
    mean, per_group = within_group_auroc(scores, correct, groups)
    assert mean == pytest.approx(pairwise_within_group_auroc(scores.tolist(), correct.tolist(),
                                                             groups), abs=1e-12)
    for label, value in per_group.items():
        rows = [i for i, g in enumerate(groups) if g == label]
        want = pairwise_auroc(scores[rows].tolist(), correct[rows].tolist())
        assert value == pytest.approx(want, abs=1e-12) if want is not None else value is None
    assert list(per_group) == ["2 numbers", "3 numbers", "4 numbers"]


def test_within_group_auroc_skips_one_sided_groups_and_is_none_without_any():
    mean, per_group = within_group_auroc([0.9, 0.1, 0.5, 0.4], [1, 0, 1, 1], ["a", "a", "b", "b"])
    assert mean == 1.0 and per_group == {"a": 1.0, "b": None}
    assert within_group_auroc([0.3, 0.4], [1, 1], ["a", "b"]) == (None, {"a": None, "b": None})


def test_a_difficulty_table_ranks_by_group_and_is_a_coin_within_one():
    # Every answer of a group gets one value per fold: inside the group the table is about 0.5,
    # overall it ranks by difficulty.
    groups = ["easy"] * 400 + ["hard"] * 400
    # problem i sits in fold i % 5; (i // 5) % 10 gives every fold the group's accuracy
    correct = [(i // 5) % 10 < 8 for i in range(400)] + [(i // 5) % 10 < 2 for i in range(400)]
    conf = difficulty_table_confidences(correct, groups, list(range(800)))
    assert set(np.round(conf[:400], 6)) == {0.8} and set(np.round(conf[400:], 6)) == {0.2}
    assert within_group_auroc(conf, correct, groups)[0] == 0.5


@pytest.mark.parametrize("seed", range(3))
def test_difficulty_table_matches_the_reference_and_never_sees_its_own_problem(seed):
    _, correct, groups, clusters = _random_eval(seed, problems=23)
    got = difficulty_table_confidences(correct, groups, clusters)
    want = _table_reference(correct.tolist(), groups, clusters, TABLE_FOLDS)
    np.testing.assert_allclose(got, want, atol=1e-12)
    # flipping one problem's answers leaves that problem's own table values unchanged
    flipped = correct.copy()
    first = [i for i, c in enumerate(clusters) if c == clusters[0]]
    flipped[first] = ~flipped[first]
    again = difficulty_table_confidences(flipped, groups, clusters)
    np.testing.assert_allclose(again[first], got[first], atol=1e-12)


def test_a_group_missing_from_the_other_folds_gets_their_overall_accuracy():
    conf = difficulty_table_confidences([1, 0, 1, 1, 0], ["a", "a", "a", "a", "rare"],
                                        [0, 1, 2, 3, 4], folds=5)
    assert conf[4] == pytest.approx(3 / 4)
    assert conf[1] == pytest.approx(1.0)  # the other three "a" answers are right



def test_baseline_metrics_block():
    scores, correct, groups, clusters = _random_eval(7)
    block = baseline_metrics(correct, groups, clusters, scores.tolist())
    table = difficulty_table_confidences(correct, groups, clusters)
    assert block["difficulty_table"]["brier"] == pytest.approx(brier_score(table, correct))
    assert "other 4 of 5 folds" in block["difficulty_table"]["fit"]
    likelihood = block["answer_likelihood"]
    assert likelihood["auroc"] == pytest.approx(pairwise_auroc(scores.tolist(), correct.tolist()))
    assert likelihood["within_group_auroc"] == within_group_auroc(scores, correct, groups)[0]
    missing = baseline_metrics(correct, groups, clusters, [None] * len(groups))
    assert missing["answer_likelihood"] is None
