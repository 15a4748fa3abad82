"""Accuracy and calibration metrics: pure functions on per-example arrays.

Records (one evaluated answer each) become arrays once, in `calibrl.evaluation.records`; the
flat summary of one evaluation is `calibrl.evaluation.summary.summarize`, the whole evaluation
`calibrl.evaluation.result.compute_evaluation`.

Shapes: `confidences` and `correct` are 1-D, shape (N,), one entry per evaluated answer.
`confidences` are floats in [0, 1]; `correct` is bool or 0/1.

Binning (ECE, reliability diagram, confidence histogram), with n = n_bins and exact edges i/n:
    bin 0 = [0, 1/n],  bin i = (i/n, (i+1)/n]  for i >= 1
i.e. right-closed, 0.0 in the first bin, 1.0 in the last. A verbalised "0.9" therefore sits in
(0.8, 0.9] and "1.0" alone in (0.9, 1.0]: always answering 1.0, the overconfidence that plain RL
produces, gets a bin of its own. Edges are i/n, not `np.linspace`, so a parsed "0.3" equals its
edge exactly. (The RLCR paper's code uses left-closed `np.digitize` on linspace edges, whose float
error puts 0.3, 0.6 and 0.7 one bin lower than 0.1 or 0.5; numbers agree with it only where no
confidence lies on an edge.)

Unparsable confidences (`None`) are scored as `UNPARSABLE_CONFIDENCE` = 0.0 in ECE, Brier, AUROC
and mean confidence: no readable confidence claims nothing, so a correct answer loses all credit
and a wrong one is treated like an honest "0". Dropping them would let a model look calibrated by
breaking the format whenever it is unsure; imputing the worst case (1 - correct) would make the
prediction depend on the label. Their share is reported beside the metrics, so a format problem
stays visible. The training reward differs (it gives 0 reward to any unparsable output) because
it must make breaking the format worse than every honest answer; a metric only has to score the
prediction.

That holds while the stated values are most of what is scored. Calibration metrics (ECE, Brier,
AUROC, AURC, mean confidence: `CONFIDENCE_METRICS`) need at least `MIN_PARSED_SHARE` = half of
the answers' confidences parsed; below it they are not available, with the reason
(`calibration_unavailable`), and the unparsable share alone is reported. Below half, most scored
values would be the stand-in 0.0, and the metrics would describe it, not the model: with none
parsed and every answer wrong, ECE and Brier read 0.0, a perfect score from nothing. Half is
where the model's own values become the majority; the runs in docs/results parse 95-100 %.

Selective prediction (risk-coverage, AURC): answer only when confidence >= t. Answers with equal
confidence are answered or withheld together, so no result depends on an arbitrary order among
ties. Unparsable confidences, scored 0.0, are the last to be answered.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

UNPARSABLE_CONFIDENCE = 0.0
DEFAULT_N_BINS = 10
MIN_PARSED_SHARE = 0.5
# The metrics that score the stated confidence: not available together (module docstring).
CONFIDENCE_METRICS = ("ece", "brier", "auroc", "aurc", "mean_confidence")


@dataclass(frozen=True)
class ReliabilityBin:
    """One confidence bin; `mean_confidence` and `accuracy` are None when `count` is 0."""

    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


def check_arrays(confidences: Any, correct: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate and convert to float64 arrays of shape (N,)."""
    conf = np.asarray(confidences, dtype=np.float64)
    corr = np.asarray(correct)
    if conf.ndim != 1 or corr.ndim != 1:
        raise ValueError("confidences and correct must be 1-D")
    if conf.shape != corr.shape:
        raise ValueError(f"{conf.shape[0]} confidences but {corr.shape[0]} correctness labels")
    if conf.size == 0:
        raise ValueError("no examples to evaluate")
    if not np.all(np.isfinite(conf)) or conf.min() < 0.0 or conf.max() > 1.0:
        raise ValueError("confidences must be finite and within [0, 1]")
    corr = corr.astype(np.float64)
    if not np.all((corr == 0.0) | (corr == 1.0)):
        raise ValueError("correct must be bool or 0/1")
    return conf, corr


def calibration_unavailable(parsable: Any) -> str | None:
    """Why the calibration metrics of these answers are not available (fewer than
    `MIN_PARSED_SHARE` of their confidences parsed), or None when they are.

    Shape: parsable (N,) bool, N > 0.
    """
    parsable = np.asarray(parsable, dtype=bool)
    parsed, n = int(parsable.sum()), int(parsable.size)
    if parsed >= MIN_PARSED_SHARE * n:
        return None
    if parsed == 0:
        return f"no confidence parsed ({n} of {n} unparsable)"
    return f"only {parsed} of {n} confidences parsed; calibration needs at least half"


def check_n_bins(n_bins: int) -> None:
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")


def bin_edges(n_bins: int = DEFAULT_N_BINS) -> np.ndarray:
    """Exact edges i / n_bins, shape (n_bins + 1,)."""
    check_n_bins(n_bins)
    return np.arange(n_bins + 1, dtype=np.float64) / n_bins


def bin_index(confidences: Any, n_bins: int = DEFAULT_N_BINS) -> np.ndarray:
    """Bin of each confidence under the right-closed convention above; shape (N,), int64."""
    conf = np.asarray(confidences, dtype=np.float64)
    # side="left" finds the first edge >= c, so c on an edge joins the bin that edge closes.
    idx = np.searchsorted(bin_edges(n_bins), conf, side="left") - 1
    return np.clip(idx, 0, n_bins - 1).astype(np.int64)


def reliability_bins(
    confidences: Any, correct: Any, n_bins: int = DEFAULT_N_BINS
) -> list[ReliabilityBin]:
    """Per-bin count, mean confidence and accuracy; the one binning ECE and the plots use."""
    conf, corr = check_arrays(confidences, correct)
    edges = bin_edges(n_bins)
    idx = bin_index(conf, n_bins)
    counts = np.bincount(idx, minlength=n_bins)  # (n_bins,)
    conf_sums = np.bincount(idx, weights=conf, minlength=n_bins)  # (n_bins,)
    hit_sums = np.bincount(idx, weights=corr, minlength=n_bins)  # (n_bins,)
    bins = []
    for i in range(n_bins):
        n = int(counts[i])
        bins.append(ReliabilityBin(
            lower=float(edges[i]),
            upper=float(edges[i + 1]),
            count=n,
            mean_confidence=float(conf_sums[i] / n) if n else None,
            accuracy=float(hit_sums[i] / n) if n else None,
        ))
    return bins


def ece_from_bins(bins: Iterable[ReliabilityBin]) -> float:
    """Sum over non-empty bins of (bin share) * |mean confidence - accuracy|."""
    bins = [b for b in bins if b.count > 0]
    total = sum(b.count for b in bins)
    if total == 0:
        raise ValueError("no examples to evaluate")
    return float(sum(b.count / total * abs(b.mean_confidence - b.accuracy) for b in bins))


def expected_calibration_error(
    confidences: Any, correct: Any, n_bins: int = DEFAULT_N_BINS
) -> float:
    """ECE with `n_bins` equal-width bins on [0, 1] (RLCR uses 10). In [0, 1]; lower is better."""
    return ece_from_bins(reliability_bins(confidences, correct, n_bins))


def brier_score(confidences: Any, correct: Any) -> float:
    """Mean of (confidence - correct)^2 over examples. In [0, 1]; lower is better."""
    conf, corr = check_arrays(confidences, correct)
    return float(np.mean((conf - corr) ** 2))


def auroc(confidences: Any, correct: Any) -> float | None:
    """P(a random correct example has higher confidence than a random wrong one), ties count 1/2.

    Computed as the Mann-Whitney U statistic with average ranks for ties.
    Returns None (never NaN) when all examples are correct or all are wrong: the quantity is then
    undefined, and None is what JSON and the comparison table show as "n/a".
    """
    conf, corr = check_arrays(confidences, correct)
    n_pos = float(corr.sum())
    n_neg = float(corr.size) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    # Average rank (1-based) of each distinct value, then of each example.
    _, inverse, counts = np.unique(conf, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # (D,)
    ranks = ((last - counts + 1 + last) / 2.0)[inverse]  # (N,)
    u = ranks[corr == 1.0].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def risk_coverage(
    confidences: Any, correct: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The risk-coverage curve: (coverage, risk, thresholds), each shape (K,), K distinct values.

    Point k answers every example with confidence >= thresholds[k] (thresholds descending):
    coverage[k] = share answered, risk[k] = error rate among them. Coverage increases and the
    last point is coverage 1, where risk = 1 - accuracy.
    """
    conf, corr = check_arrays(confidences, correct)
    values, inverse = np.unique(conf, return_inverse=True)  # ascending
    counts = np.bincount(inverse, minlength=values.size)[::-1]  # (K,), descending confidence
    errors = np.bincount(inverse, weights=1.0 - corr, minlength=values.size)[::-1]  # (K,)
    answered = np.cumsum(counts)
    return answered / conf.size, np.cumsum(errors) / answered, values[::-1].copy()


def aurc_from_curve(coverage: Any, risk: Any) -> float:
    """Area under a `risk_coverage` curve, read as a step function: sum_k dcov_k * risk_k.

    Shapes: coverage (K,) increasing to 1, risk (K,); dcov_k = coverage[k] - coverage[k-1]
    with coverage[-1] := 0.
    """
    coverage = np.asarray(coverage, dtype=np.float64)
    risk = np.asarray(risk, dtype=np.float64)
    if coverage.ndim != 1 or coverage.shape != risk.shape or coverage.size == 0:
        raise ValueError("coverage and risk must be non-empty 1-D arrays of one shape")
    return float(np.sum(np.diff(coverage, prepend=0.0) * risk))


def aurc(confidences: Any, correct: Any) -> float:
    """Area under the risk-coverage curve (Geifman & El-Yaniv). In [0, 1]; lower is better.

        AURC = (1/N) * sum_{i=1..N} r_i,   r_i = errors among the top i / i

    with answers sorted by confidence, descending. Ties: every answer of a tie group gets the
    risk of the whole group, r_i = r_{k(i)} with k(i) the last position of i's group, so AURC
    equals `aurc_from_curve(*risk_coverage(...)[:2])` and the mean over examples j of the error
    rate among answers with confidence >= confidence_j. Shapes: confidences (N,), correct (N,).
    """
    coverage, risk, _ = risk_coverage(confidences, correct)
    return aurc_from_curve(coverage, risk)


def optimal_aurc(correct: Any) -> float:
    """The AURC of a perfect ranker (every correct answer above every wrong one, no ties).

        AURC* = (1/N) * sum_{i=n+1..N} (i - n) / i,   n = number correct

    It tends to (1 - acc) + acc * ln(acc) as N grows. No ranking does better, ties included:
    the risk of the top i is at least (i - n) / i. Shape: correct (N,).
    """
    _, corr = check_arrays(np.zeros(np.shape(correct)), correct)
    n = int(corr.sum())
    i = np.arange(n + 1, corr.size + 1, dtype=np.float64)
    return float(np.sum((i - n) / i) / corr.size)


def e_aurc(confidences: Any, correct: Any) -> float:
    """Excess AURC, `aurc - optimal_aurc` >= 0: the part of AURC due to the ranking alone."""
    return aurc(confidences, correct) - optimal_aurc(correct)


def natural_key(label: str) -> tuple[Any, ...]:
    """Sort key comparing digit runs as numbers: "2 numbers" < "3 numbers" < "10 numbers"."""
    # re.split with a capture group alternates text and digits, so positions agree in type.
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", label))
