"""Metrics: hand-computed values, edge cases, and fast versions against slow obvious loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calibrl.evaluation.metrics import (
    aurc,
    auroc,
    bin_index,
    brier_score,
    e_aurc,
    expected_calibration_error,
    natural_key,
    optimal_aurc,
    reliability_bins,
    risk_coverage,
)
from calibrl.evaluation.records import NO_GROUP, EvalRecord, calibration_arrays, record_arrays
from calibrl.evaluation.summary import METRIC_KEYS, summarize, summarize_by_group

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
#   AURC: order .9 .6 .2 0 -> risks 0, 0, 1/3, 1/2 -> (5/6) / 4 = 5/24
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
    assert m["aurc"] == pytest.approx(5 / 24)
    assert m["mean_answer_len"] == 25.0 and m["mean_conf_len"] == 5.0


def test_summarize_accepts_dicts_like_dataclasses():
    as_dicts = [vars(r) for r in RECORDS]
    assert summarize(as_dicts) == summarize(RECORDS)


def test_summarize_of_arrays_is_summarize_of_records():
    records = _grouped_records(1)
    arrays = record_arrays(records)
    for with_confidence in (True, False):
        assert (summarize(arrays, with_confidence=with_confidence)
                == summarize(records, with_confidence=with_confidence))
        assert (summarize_by_group(arrays, with_confidence=with_confidence)
                == summarize_by_group(records, with_confidence=with_confidence))


def test_summarize_without_confidence_reports_none_for_calibration():
    records = [dict(correct=c, confidence=None, format_ok=True, answer_len=5, conf_len=None)
               for c in (True, False, True)]
    m = summarize(records, with_confidence=False)
    assert m["accuracy"] == pytest.approx(2 / 3)
    for key in ("ece", "brier", "auroc", "aurc", "mean_confidence", "unparsable_confidence_rate",
                "mean_conf_len"):
        assert m[key] is None


def test_hostile_confidences_count_as_unparsable_and_never_nan():
    # Seven that parse beside the six hostile ones, so the calibration metrics are computed.
    records = [dict(correct=y, confidence=c, format_ok=True, answer_len=1, conf_len=1)
               for y, c in [(True, float("nan")), (False, 7.0), (True, "0.5"), (False, True),
                            (True, float("inf")), (False, -0.1), (True, np.float32(0.5))]
               + [(y, 0.5) for y in (True, False) * 3]]
    conf, _, parsable = calibration_arrays(records)
    assert parsable.tolist() == [False] * 6 + [True] * 7
    m = summarize(records)
    assert m["unparsable_confidence_rate"] == pytest.approx(6 / 13)
    assert m["ece"] is not None
    assert all(v is None or math.isfinite(v) for v in m.values())


def test_all_unparsable_reports_no_calibration_but_the_unparsable_share():
    # Scored as confidence 0 they would read ECE 1 here, and ECE 0 had both answers been wrong:
    # numbers of the stand-in, not of the model (tests/evaluation/test_calibration_unavailable).
    records = [dict(correct=True, confidence=None, format_ok=False, answer_len=3, conf_len=0)] * 2
    m = summarize(records)
    assert (m["brier"], m["ece"], m["auroc"], m["mean_confidence"]) == (None,) * 4
    assert m["calibration_unavailable"] == "no confidence parsed (2 of 2 unparsable)"
    assert m["unparsable_confidence_rate"] == 1.0 and m["format_failure_rate"] == 1.0


def test_summarize_errors():
    with pytest.raises(ValueError, match="no examples to evaluate"):
        summarize([])
    with pytest.raises(ValueError, match="record 0 has no 'format_ok'"):
        summarize([dict(correct=True, confidence=0.5, answer_len=1, conf_len=1)])


# Risk-coverage and AURC. Hand-worked cases:
#   all correct: every risk 0 -> AURC 0;  all wrong: every risk 1 -> AURC 1.
#   half right, perfectly ranked, conf [.9, .8, .3, .2], correct [1, 1, 0, 0]:
#     top-i risks 0, 0, 1/3, 2/4 -> AURC = (1/3 + 1/2) / 4 = 5/24 (also the optimum for n=2, N=4)
#   one tie group, conf [.5] * 4, correct [1, 0, 1, 0]: every answer gets the group's risk 1/2
#     -> AURC 1/2 (an order-dependent version would give (0 + 1/2 + 1/3 + 1/2) / 4 = 1/3).
#   ties inside: conf [.9, .5, .5, .1], correct [1, 0, 1, 0]: groups {.9}: risk 0;
#     {.5, .5}: 1 error in 3 -> 1/3 for both; {.1}: 2/4 -> AURC = (0 + 2/3 + 1/2) / 4 = 7/24.
def test_risk_coverage_hand_computed():
    coverage, risk, thresholds = risk_coverage([0.9, 0.5, 0.5, 0.1], [1, 0, 1, 0])
    assert coverage.tolist() == [0.25, 0.75, 1.0]
    assert risk.tolist() == pytest.approx([0.0, 1 / 3, 0.5])
    assert thresholds.tolist() == [0.9, 0.5, 0.1]


@pytest.mark.parametrize(
    "conf, correct, expected",
    [
        ([0.3, 0.9, 0.9], [1, 1, 1], 0.0),
        ([0.0, 0.5, 1.0], [0, 0, 0], 1.0),
        ([0.9, 0.8, 0.3, 0.2], [1, 1, 0, 0], 5 / 24),
        ([0.2, 0.3, 0.8, 0.9], [1, 1, 0, 0], (1 + 1 + 2 / 3 + 1 / 2) / 4),  # reversed ranking
        ([0.5] * 4, [1, 0, 1, 0], 0.5),
        ([0.9, 0.5, 0.5, 0.1], [1, 0, 1, 0], 7 / 24),
    ],
)
def test_aurc_hand_computed(conf, correct, expected):
    assert aurc(conf, correct) == pytest.approx(expected, abs=1e-12)


def test_aurc_ignores_input_order_among_ties():
    assert aurc([0.5, 0.5, 0.5, 0.5], [0, 1, 0, 1]) == aurc([0.5] * 4, [1, 1, 0, 0])


def _slow_aurc(conf, correct):
    """Mean over positions of the top-i risk, a tie group sharing the risk at its last member."""
    order = sorted(range(len(conf)), key=lambda k: -conf[k])
    total = 0.0
    for i in range(1, len(conf) + 1):
        last = i
        while last < len(conf) and conf[order[last]] == conf[order[i - 1]]:
            last += 1
        errors = sum(1 for k in order[:last] if not correct[k])
        total += errors / last
    return total / len(conf)


def _slow_risk_coverage(conf, correct):
    points = []
    for t in sorted(set(conf), reverse=True):
        answered = [k for k in range(len(conf)) if conf[k] >= t]
        wrong = sum(1 for k in answered if not correct[k])
        points.append((len(answered) / len(conf), wrong / len(answered), t))
    return points


@pytest.mark.parametrize("seed", range(6))
def test_aurc_and_curve_match_slow_loops(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 150))
    conf = (rng.integers(0, 11, n) / 10).tolist()  # a grid of 11 values: many ties
    correct = (rng.random(n) < rng.random()).tolist()
    assert aurc(conf, correct) == pytest.approx(_slow_aurc(conf, correct), abs=1e-12)
    coverage, risk, thresholds = risk_coverage(conf, correct)
    slow = _slow_risk_coverage(conf, correct)
    assert np.allclose(np.column_stack([coverage, risk, thresholds]), slow, atol=1e-12)


def test_optimal_aurc():
    # The hand case above is ranked perfectly: AURC = optimum = 5/24, excess 0.
    assert optimal_aurc([1, 1, 0, 0]) == pytest.approx(5 / 24)
    assert e_aurc([0.9, 0.8, 0.3, 0.2], [1, 1, 0, 0]) == pytest.approx(0.0, abs=1e-12)
    assert optimal_aurc([1, 1]) == 0.0 and optimal_aurc([0, 0]) == 1.0
    # Large N: the discrete optimum approaches (1 - acc) + acc * ln(acc).
    for acc in (0.2, 0.5, 0.9):
        correct = np.arange(100_000) < acc * 100_000
        assert optimal_aurc(correct) == pytest.approx((1 - acc) + acc * math.log(acc), abs=1e-4)


@pytest.mark.parametrize("seed", range(4))
def test_excess_aurc_is_never_negative(seed):
    rng = np.random.default_rng(seed)
    conf = rng.integers(0, 11, 80) / 10
    correct = rng.random(80) < 0.6
    assert e_aurc(conf, correct) >= -1e-12
    # Perfect ranking without ties attains the optimum exactly.
    perfect = np.where(correct, 0.5, 0.0) + rng.permutation(80) / 200
    assert e_aurc(perfect, correct) == pytest.approx(0.0, abs=1e-12)


def test_natural_key_orders_numbers_by_value():
    labels = ["10 numbers", "coin", "3 numbers", "2 numbers"]
    assert sorted(labels, key=natural_key) == ["2 numbers", "3 numbers", "10 numbers", "coin"]


def _grouped_records(seed):
    rng = np.random.default_rng(seed)
    labels = ["10 numbers", "3 numbers", "2 numbers", None]
    return [dict(correct=bool(rng.random() < 0.5),
                 confidence=None if rng.random() < 0.1 else float(rng.integers(0, 11) / 10),
                 format_ok=bool(rng.random() < 0.9), answer_len=int(rng.integers(1, 50)),
                 conf_len=int(rng.integers(1, 9)), group=labels[int(rng.integers(0, 4))])
            for _ in range(120)]


@pytest.mark.parametrize("with_confidence", [True, False])
def test_summarize_by_group_is_summarize_of_each_subset(with_confidence):
    records = _grouped_records(0)
    by_group = summarize_by_group(records, with_confidence=with_confidence, n_bins=5)
    assert list(by_group) == ["2 numbers", "3 numbers", "10 numbers", NO_GROUP]
    for label, metrics in by_group.items():
        subset = [r for r in records if (r["group"] or NO_GROUP) == label]
        assert metrics == summarize(subset, with_confidence=with_confidence, n_bins=5)
    assert sum(m["count"] for m in by_group.values()) == len(records)


def test_summarize_by_group_of_eval_records():
    records = [EvalRecord(True, 0.9, True, 3, 1, group="3 numbers"),
               EvalRecord(False, 0.2, True, 3, 1, group="3 numbers"),
               EvalRecord(True, 0.6, True, 3, 1)]
    by_group = summarize_by_group(records)
    assert by_group["3 numbers"]["count"] == 2 and by_group[NO_GROUP]["count"] == 1
    assert by_group["3 numbers"]["auroc"] == 1.0
    with pytest.raises(ValueError, match="no examples to evaluate"):
        summarize_by_group([])
