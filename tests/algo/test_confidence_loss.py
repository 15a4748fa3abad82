"""The confidence warm-up's losses against slow, obvious loops over rows and value tokens."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from calibrl.algo.confidence_loss import (
    CONFIDENCE_LOSSES,
    agreement,
    expected_brier,
    expected_value,
    held_out_binned_targets,
    mapped_targets,
    nearest_value_ce,
    nearest_value_index,
    value_mass_nll,
)

VALUES = torch.tensor([d / 10 for d in range(10)])


def _softmax(row: list[float]) -> list[float]:
    top = max(row)
    e = [math.exp(x - top) for x in row]
    return [x / sum(e) for x in e]


def _brier_loop(logits, values, targets):
    out = []
    for row, y in zip(logits.tolist(), targets.tolist(), strict=True):
        p = _softmax(row)
        out.append(sum(pk * (v - y) ** 2 for pk, v in zip(p, values.tolist(), strict=True)))
    return out


def _nearest_loop(values, y):
    best = 0
    for k, v in enumerate(values.tolist()):
        if abs(v - y) < abs(values[best].item() - y):
            best = k
    return best


@pytest.fixture
def batch():
    torch.manual_seed(0)
    logits = torch.randn(7, 10) * 3
    targets = torch.tensor([0.0, 1.0, 1.0, 0.0, 0.25, 0.66, 0.05])
    return logits, targets


def test_expected_brier_equals_the_loop(batch):
    logits, targets = batch
    got = expected_brier(logits, VALUES, targets)
    assert got.shape == (7,)
    assert got.tolist() == pytest.approx(_brier_loop(logits, VALUES, targets), abs=1e-6)


def test_expected_brier_is_least_with_all_mass_on_the_value_nearest_the_chance():
    # A row right with chance q: the expected loss over outcomes is linear in p, least at the
    # value nearest q: the stated value is sharp and calibrated.
    q = 0.7
    losses = []
    for k in range(10):
        logits = torch.full((2, 10), -30.0)
        logits[:, k] = 30.0
        pair = expected_brier(logits, VALUES, torch.tensor([1.0, 0.0]))
        losses.append(float(q * pair[0] + (1 - q) * pair[1]))
    assert min(range(10), key=losses.__getitem__) == 7


def test_nearest_value_ce_equals_the_loop(batch):
    logits, targets = batch
    got = nearest_value_ce(logits, VALUES, targets)
    for b, y in enumerate(targets.tolist()):
        k = _nearest_loop(VALUES, y)
        assert nearest_value_index(VALUES, targets)[b] == k
        assert got[b].item() == pytest.approx(-math.log(_softmax(logits[b].tolist())[k]),
                                              abs=1e-5)


def test_value_mass_nll_and_expected_value_equal_the_loops():
    torch.manual_seed(1)
    logits = torch.randn(4, 30)
    ids = torch.tensor([3, 7, 11, 29])
    vals = torch.tensor([0.0, 0.3, 0.6, 0.9])
    for b in range(4):
        p = _softmax(logits[b].tolist())
        assert value_mass_nll(logits, ids)[b].item() == pytest.approx(
            -math.log(sum(p[i] for i in ids.tolist())), abs=1e-5)
        q = _softmax(logits[b, ids].tolist())
        assert expected_value(logits[:, ids], vals)[b].item() == pytest.approx(
            sum(qk * v for qk, v in zip(q, vals.tolist(), strict=True)), abs=1e-6)
    assert bool((value_mass_nll(logits, torch.arange(30)).abs() < 1e-5).all())


def test_losses_have_gradients_and_stay_finite_on_extreme_logits():
    logits = torch.tensor([[1e4] + [-1e4] * 9, [float("-inf")] * 9 + [0.0]], requires_grad=True)
    for name, loss in CONFIDENCE_LOSSES.items():
        value = loss(logits, VALUES, torch.tensor([0.0, 1.0])).sum()
        value.backward()
        assert math.isfinite(value.item()), name
        assert bool(torch.isfinite(logits.grad).all()), name
        logits.grad = None


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
