"""Recalibration (Platt scaling): the fit is the smoothed cross-entropy's optimum, it undoes a
known miscalibration, keeps the order of the answers, stays finite on one class, and leaves
answers without a value as they are."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calibrl.evaluation.metrics import auroc
from calibrl.evaluation.recalibration import (
    BEFORE_KEY,
    PlattMap,
    fit_platt,
    log_odds,
    reading_values,
    recalibrated_records,
    smoothed_targets,
)
from calibrl.evaluation.records import EXPECTED, SAMPLED
from calibrl.evaluation.result import compute_evaluation


def cross_entropy(slope: float, intercept: float, conf: np.ndarray, correct: np.ndarray) -> float:
    """The mean cross-entropy of Platt's smoothed targets, written out per answer."""
    k, m = sum(correct), len(correct) - sum(correct)
    total = 0.0
    for c, y in zip(conf, correct, strict=True):
        p = min(max(c, 1e-4), 1 - 1e-4)
        z = slope * math.log(p / (1 - p)) + intercept
        q = 1 / (1 + math.exp(-z))
        t = (k + 1) / (k + 2) if y else 1 / (m + 2)
        total -= t * math.log(q) + (1 - t) * math.log(1 - q)
    return total / len(conf)


def overconfident(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Stated values whose answers are right with probability sigmoid(0.5 * logit(c) - 1)."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0.02, 0.98, n)
    truth = 1 / (1 + np.exp(-(0.5 * log_odds(conf) - 1.0)))
    return conf, rng.random(n) < truth


def test_the_fit_is_the_optimum_of_the_written_out_loss():
    conf, correct = overconfident(200, seed=0)
    platt = fit_platt(conf, correct)
    best = min(cross_entropy(a, b, conf, correct) for a in np.linspace(-1, 2, 41)
               for b in np.linspace(-3, 1, 51))
    assert cross_entropy(platt.slope, platt.intercept, conf, correct) <= best + 1e-7
    h = 1e-5  # and a stationary point of the written-out loss
    for da, db in ((h, 0.0), (0.0, h)):
        slope = (cross_entropy(platt.slope + da, platt.intercept + db, conf, correct)
                 - cross_entropy(platt.slope - da, platt.intercept - db, conf, correct)) / (2 * h)
        assert abs(slope) < 1e-4
    assert platt.answers == 200 and platt.rate == pytest.approx(correct.mean())


def test_a_known_miscalibration_is_undone():
    conf, correct = overconfident(20_000, seed=1)
    platt = fit_platt(conf, correct)
    assert platt.slope == pytest.approx(0.5, abs=0.05)
    assert platt.intercept == pytest.approx(-1.0, abs=0.06)


def test_the_map_keeps_the_order_and_lowers_ece_on_other_answers():
    fit_conf, fit_correct = overconfident(600, seed=2)
    conf, correct = overconfident(600, seed=3)
    platt = fit_platt(fit_conf, fit_correct)
    mapped = platt(conf)
    assert np.all(np.diff(mapped[np.argsort(conf)]) >= 0)
    assert auroc(mapped, correct) == pytest.approx(auroc(conf, correct))
    records = [{"correct": bool(y), "confidence": float(c), "format_ok": True, "answer_len": 5}
               for c, y in zip(conf, correct, strict=True)]

    def ece(rows: list[dict]) -> float:
        result = compute_evaluation(rows, name="x", mode="two_turn", with_confidence=True,
                                    bootstrap=0)
        return float(result.metrics["ece"])

    before, after = ece(records), ece(recalibrated_records(records, platt, SAMPLED))
    assert before > 0.15 and after < 0.06


@pytest.mark.parametrize("right", [True, False])
def test_one_class_gives_a_finite_map_at_the_smoothed_rate(right):
    conf = np.linspace(0.0, 1.0, 11)
    correct = np.full(11, right)
    platt = fit_platt(conf, correct)
    mapped = platt(conf)
    assert np.isfinite([platt.slope, platt.intercept]).all()
    assert mapped == pytest.approx(smoothed_targets(correct), abs=1e-3)


def test_a_value_that_ranks_backwards_gets_the_flat_map_never_a_reversed_one():
    conf, correct = overconfident(400, seed=4)
    platt = fit_platt(conf, ~correct)
    assert platt.slope == 0.0
    flat = [cross_entropy(0.0, b, conf, ~correct) for b in np.linspace(-3, 3, 601)]
    assert cross_entropy(0.0, platt.intercept, conf, ~correct) <= min(flat) + 1e-9
    assert np.ptp(platt(conf)) == 0.0


@pytest.mark.parametrize("bad", [[0.2, math.nan], [0.2, 1.5], [], [-0.1, 0.3]])
def test_bad_confidences_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="fit_platt"):
        fit_platt(np.array(bad, dtype=float), np.zeros(len(bad), dtype=bool))


def test_answers_without_a_value_are_left_out_of_the_fit_and_copied_as_they_are():
    records = [{"correct": True, "confidence": 0.9, "stated_expected": 0.6},
               {"correct": False, "confidence": None, "stated_expected": 0.3},
               {"correct": False, "confidence": float("nan"), "stated_expected": None},
               {"correct": True, "confidence": "high", "stated_expected": 0.8}]
    conf, correct = reading_values(records, SAMPLED)
    assert conf.tolist() == [0.9] and correct.tolist() == [True]
    conf, correct = reading_values(records, EXPECTED)
    assert conf.tolist() == [0.6, 0.3, 0.8] and correct.tolist() == [True, False, True]
    platt = PlattMap(slope=1.0, intercept=math.log(0.25), answers=3, rate=0.5)
    rows = recalibrated_records(records, platt, EXPECTED)
    assert [r[BEFORE_KEY] for r in rows if BEFORE_KEY in r] == [0.6, 0.3, 0.8]
    assert rows[0]["stated_expected"] == pytest.approx(0.6 * 0.25 / (0.6 * 0.25 + 0.4))
    assert rows[2] == records[2] and BEFORE_KEY not in rows[2]
    assert all(r["confidence"] is records[i]["confidence"] for i, r in enumerate(rows))
    assert records[0]["stated_expected"] == 0.6  # the input is not changed
