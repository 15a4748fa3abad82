"""Metrics: hand-computed values, edge cases, and fast versions against slow obvious loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calibrl.evaluation.metrics import (
    METRIC_KEYS,
    EvalRecord,
    auroc,
    bin_index,
    brier_score,
    calibration_arrays,
    expected_calibration_error,
    reliability_bins,
    summarize,
)

# Worked example used below. 10 bins, right-closed:
#   0.1  -> bin 0 [0, .1]     conf .1,  acc 0   gap .1, share 1/5 -> .02
#   0.3  -> bin 2 (.2, .3]    conf .3,  acc .5  gap .2, share 2/5 -> .08   (two examples)
#   0.9  -> bin 8 (.8, .9]    conf .9,  acc 1   gap .1, share 1/5 -> .02
#   0.95 -> bin 9 (.9, 1]     conf .95, acc 1   gap .05, share 1/5 -> .01
#   ECE = .13
# Brier = (.1^2 + .7^2 + .3^2 + .1^2 + .05^2) / 5 = (.01 + .49 + .09 + .01 + .0025) / 5 = .1205
# AUROC: correct {.3, .9, .95} vs wrong {.1, .3}: .3 beats .1 (1), ties .3 (1/2);
#   .9 and .95 beat both (4)  -> 5.5 / 6
CONF = [0.1, 0.3, 0.3, 0.9, 0.95]
CORRECT = [False, True, False, True, True]


def test_hand_computed_example():
    assert expected_calibration_error(CONF, CORRECT) == pytest.approx(0.13)
    assert brier_score(CONF, CORRECT) == pytest.approx(0.1205)
    assert auroc(CONF, CORRECT) == pytest.approx(5.5 / 6)


def test_reliability_bins_of_example():
    bins = reliability_bins(CONF, CORRECT)
    assert [b.count for b in bins] == [1, 0, 2, 0, 0, 0, 0, 0, 1, 1]
    assert bins[2].mean_confidence == pytest.approx(0.3) and bins[2].accuracy == 0.5
    assert bins[1].mean_confidence is None and bins[1].accuracy is None
    assert (bins[3].lower, bins[3].upper) == (0.3, 0.4)
    assert bins[0].lower == 0.0 and bins[-1].upper == 1.0


def test_bin_edges_are_right_closed_with_zero_in_first_bin():
    # Values as a parser produces them from "0.0", "0.1", ..., "1.0".
    decimals = [float(f"{i / 10:.1f}") for i in range(11)]
    assert bin_index(decimals).tolist() == [0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert bin_index([0.30000000000000004, 0.95, 1e-12]).tolist() == [3, 9, 0]
    assert bin_index([0.0, 0.5, 1.0], n_bins=2).tolist() == [0, 0, 1]


def test_all_correct():
    # All in the last bin: conf 1, acc 1 -> ECE 0; Brier 0; AUROC undefined -> None.
    assert expected_calibration_error([1.0, 1.0], [True, True]) == 0.0
    assert brier_score([1.0, 1.0], [True, True]) == 0.0
    assert auroc([1.0, 0.2], [True, True]) is None


def test_all_wrong_with_exact_edges():
    # 0.0 -> bin 0 (gap 0), 0.5 -> bin 4 (gap .5): ECE = .5 * .5 = .25; Brier = (0 + .25) / 2.
    assert expected_calibration_error([0.0, 0.5], [0, 0]) == pytest.approx(0.25)
    assert brier_score([0.0, 0.5], [0, 0]) == pytest.approx(0.125)
    assert auroc([0.0, 0.5], [0, 0]) is None


def test_one_bin_is_gap_between_mean_confidence_and_accuracy():
    # mean conf (.2 + .8 + 1) / 3 = 2/3 = accuracy -> 0; second case: |.5 - 1| = .5
    assert expected_calibration_error([0.2, 0.8, 1.0], [1, 0, 1], n_bins=1) == pytest.approx(0.0)
    assert expected_calibration_error([0.0, 1.0], [1, 1], n_bins=1) == pytest.approx(0.5)


def test_auroc_ties_and_perfect_ranking():
    assert auroc([0.5, 0.5, 0.5, 0.5], [1, 0, 1, 0]) == 0.5
    assert auroc([0.9, 0.8, 0.1], [1, 1, 0]) == 1.0
    assert auroc([0.1, 0.8, 0.9], [1, 0, 0]) == 0.0


@pytest.mark.parametrize(
    "conf, correct, message",
    [
        ([], [], "no examples to evaluate"),
        ([0.5, float("nan")], [1, 0], "within"),
        ([1.2], [1], "within"),
        ([0.5], [1, 0], "labels"),
        ([0.5], [2], "0/1"),
    ],
)
def test_bad_arrays_raise_value_error(conf, correct, message):
    with pytest.raises(ValueError, match=message):
        brier_score(conf, correct)


def test_bad_n_bins():
    with pytest.raises(ValueError, match="n_bins"):
        expected_calibration_error([0.5], [1], n_bins=0)


def _slow_ece(conf, correct, n_bins):
    total, n = 0.0, len(conf)
    for i in range(n_bins):
        lo, hi = i / n_bins, (i + 1) / n_bins
        members = [k for k in range(n) if lo < conf[k] <= hi or (i == 0 and conf[k] == 0.0)]
        if members:
            mean_conf = sum(conf[k] for k in members) / len(members)
            acc = sum(correct[k] for k in members) / len(members)
            total += len(members) / n * abs(mean_conf - acc)
    return total


def _slow_auroc(conf, correct):
    pos = [c for c, y in zip(conf, correct, strict=True) if y]
    neg = [c for c, y in zip(conf, correct, strict=True) if not y]
    wins = sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in pos for q in neg)
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n_bins", [1, 7, 10])
def test_ece_matches_slow_loop(seed, n_bins):
    rng = np.random.default_rng(seed)
    # Half the confidences on round decimals (i / 10 is the float "0.i" parses to), so edges
    # are exercised.
    conf = np.where(rng.random(300) < 0.5, rng.random(300), rng.integers(0, 11, 300) / 10)
    correct = (rng.random(300) < conf).tolist()
    conf = conf.tolist()
    fast = expected_calibration_error(conf, correct, n_bins)
    assert fast == pytest.approx(_slow_ece(conf, correct, n_bins), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_auroc_matches_pairwise_loop(seed):
    rng = np.random.default_rng(seed)
    conf = np.round(rng.random(200), 1).tolist()  # heavy ties
    correct = (rng.random(200) < 0.4).tolist()
    assert auroc(conf, correct) == pytest.approx(_slow_auroc(conf, correct), abs=1e-12)


# Worked summary: imputed confidences [.9, 0 (None), .2, .6], correct [1, 0, 0, 1]
#   accuracy .5; mean conf 1.7 / 4 = .425; unparsable 1/4; format failures 1/4
#   Brier = (.01 + 0 + .04 + .16) / 4 = .0525
#   ECE: bins 8 (gap .1), 0 (gap 0), 1 (gap .2), 5 (gap .4), each share 1/4 -> .175
#   AUROC: both correct (.9, .6) above both wrong (0, .2) -> 1
RECORDS = [
    EvalRecord(correct=True, confidence=0.9, format_ok=True, answer_len=10, conf_len=4),
    EvalRecord(correct=False, confidence=None, format_ok=True, answer_len=20, conf_len=6),
    EvalRecord(correct=False, confidence=0.2, format_ok=False, answer_len=30, conf_len=5),
    EvalRecord(correct=True, confidence=0.6, format_ok=True, answer_len=40, conf_len=5),
]


def test_summarize_hand_computed():
    m = summarize(RECORDS)
    assert set(m) == set(METRIC_KEYS)
    assert m["count"] == 4 and m["n_bins"] == 10
    assert m["accuracy"] == 0.5
    assert m["mean_confidence"] == pytest.approx(0.425)
    assert m["unparsable_confidence_rate"] == 0.25
    assert m["format_failure_rate"] == 0.25
    assert m["brier"] == pytest.approx(0.0525)
    assert m["ece"] == pytest.approx(0.175)
    assert m["auroc"] == 1.0
    assert m["mean_answer_len"] == 25.0 and m["mean_conf_len"] == 5.0


def test_summarize_accepts_dicts_like_dataclasses():
    as_dicts = [vars(r) for r in RECORDS]
    assert summarize(as_dicts) == summarize(RECORDS)


def test_summarize_without_confidence_reports_none_for_calibration():
    records = [dict(correct=c, confidence=None, format_ok=True, answer_len=5, conf_len=None)
               for c in (True, False, True)]
    m = summarize(records, with_confidence=False)
    assert m["accuracy"] == pytest.approx(2 / 3)
    for key in ("ece", "brier", "auroc", "mean_confidence", "unparsable_confidence_rate",
                "mean_conf_len"):
        assert m[key] is None


def test_hostile_confidences_count_as_unparsable_and_never_nan():
    records = [dict(correct=y, confidence=c, format_ok=True, answer_len=1, conf_len=1)
               for y, c in [(True, float("nan")), (False, 7.0), (True, "0.5"), (False, True),
                            (True, float("inf")), (False, -0.1), (True, np.float32(0.5))]]
    conf, _, parsable = calibration_arrays(records)
    assert parsable.tolist() == [False] * 6 + [True]
    m = summarize(records)
    assert m["unparsable_confidence_rate"] == pytest.approx(6 / 7)
    assert all(v is None or math.isfinite(v) for v in m.values())


def test_all_unparsable_scores_as_zero_confidence():
    records = [dict(correct=True, confidence=None, format_ok=False, answer_len=3, conf_len=0)] * 2
    m = summarize(records)
    # conf 0 on correct answers: Brier 1, ECE 1, AUROC undefined.
    assert (m["brier"], m["ece"], m["auroc"], m["mean_confidence"]) == (1.0, 1.0, None, 0.0)
    assert m["unparsable_confidence_rate"] == 1.0 and m["format_failure_rate"] == 1.0


def test_summarize_errors():
    with pytest.raises(ValueError, match="no examples to evaluate"):
        summarize([])
    with pytest.raises(ValueError, match="record 0 has no 'format_ok'"):
        summarize([dict(correct=True, confidence=0.5, answer_len=1, conf_len=1)])
