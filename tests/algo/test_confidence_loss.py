"""The confidence warm-up's losses against slow, obvious loops over rows and value tokens."""

from __future__ import annotations

import math

import pytest
import torch

from calibrl.algo.confidence_loss import (
    CONFIDENCE_LOSSES,
    brier_of_expected,
    expected_brier,
    expected_value,
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


def test_brier_of_expected_equals_the_loop_and_is_expected_brier_less_the_variance(batch):
    logits, targets = batch
    got = brier_of_expected(logits, VALUES, targets)
    assert got.shape == (7,)
    for b, y in enumerate(targets.tolist()):
        p = _softmax(logits[b].tolist())
        mean = sum(pk * v for pk, v in zip(p, VALUES.tolist(), strict=True))
        variance = sum(pk * (v - mean) ** 2 for pk, v in zip(p, VALUES.tolist(), strict=True))
        assert got[b].item() == pytest.approx((mean - y) ** 2, abs=1e-6)
        assert got[b].item() + variance == pytest.approx(_brier_loop(logits, VALUES, targets)[b],
                                                         abs=1e-6)


def test_brier_of_expected_is_proper_for_the_expected_value_and_pays_nothing_for_sharpness():
    # A row right with chance q = 0.35: two distributions with the expected value 0.35, one
    # spread over 0.3 and 0.4, one over 0.0 and 0.7, lose the same, and less than any other mean;
    # the expected Brier score prefers the sharper of them.
    q, outcomes = 0.35, torch.tensor([1.0, 0.0])

    def loss(fn, probs):
        logits = torch.log(torch.tensor(probs).clamp_min(1e-12)).expand(2, 10)
        pair = fn(logits, VALUES, outcomes)
        return float(q * pair[0] + (1 - q) * pair[1])

    near = [0.0] * 10
    near[3] = near[4] = 0.5
    far = [0.0] * 10
    far[0] = far[7] = 0.5
    assert loss(brier_of_expected, near) == pytest.approx(loss(brier_of_expected, far), abs=1e-6)
    for k in range(10):
        point = [0.0] * 10
        point[k] = 1.0
        assert loss(brier_of_expected, near) < loss(brier_of_expected, point)
    assert loss(expected_brier, near) < loss(expected_brier, far)


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
