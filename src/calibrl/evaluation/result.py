"""One evaluation, computed: `compute_evaluation` turns records into an `EvaluationResult`.

Compute, then write: this module reads no file and draws nothing. It converts the records to
arrays once (`record_arrays`) and derives everything from those arrays: the flat metrics, each
group's, the task's extra scores, the references (`baselines`), the bootstrap intervals, the
reliability bins, the risk-coverage curve and what the confidence histogram draws.
`calibrl.evaluation.report.write_evaluation` only writes a result; `to_metrics` is the
metrics.json object it saves.

Shapes: N evaluated answers; K distinct confidences on the curve.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibrl.evaluation.baselines import (
    baseline_metrics,
    reading_key,
    reading_reference,
    within_group_auroc,
)
from calibrl.evaluation.bootstrap import CALIBRATED_ECE, bootstrap_intervals, calibrated_ece
from calibrl.evaluation.metrics import (
    DEFAULT_N_BINS,
    UNPARSABLE_CONFIDENCE,
    ReliabilityBin,
    reliability_bins,
    risk_coverage,
)
from calibrl.evaluation.records import EXPECTED, SAMPLED, RecordArrays, record_arrays
from calibrl.evaluation.summary import (
    UNAVAILABLE,
    mean_extra_scores,
    summarize,
    summarize_by_group,
)


@dataclass(frozen=True)
class EvaluationResult:
    """Everything an evaluation reports; `write_evaluation` writes it, nothing recomputes it.

    Attributes:
        name, mode: the run's name and mode, as saved.
        reading: which reading of the stated confidence the headline scores ("sampled" or
            "expected", `RecordArrays.stated`); the other is in `baselines`.
        with_confidence: the mode states a confidence (else every calibration part is empty).
        calibration_unavailable: why the stated confidence's metrics are not available (too
            few parsed, `metrics.calibration_unavailable`; no expected value), or None. When set, the metrics of
            the stated confidence, `within_group_auroc`, their bootstrap intervals, the bins
            and the curve are empty as without confidences; the references stay.
        n_bins, unparsable_confidence: how confidences were binned and unparsable ones scored.
        metrics: the flat `summarize` dict (`METRIC_KEYS`).
        by_group: {label: `summarize` dict (+ "extra_scores" when the task has them)} in natural
            label order; None when no record has a group.
        extra_scores: {name: mean} of the task's extra scores; {} when it has none.
        within_group_auroc: the stated confidence's size-weighted within-group AUROC.
        baselines: the references (`baseline_metrics`) and the other reading
            (`reading_reference`, when the records carry expected values or why they lack
            them); None unless grouped with confidences, and then `within_group_auroc` is not
            reported either.
        bootstrap: {metric: {"se", "low", "high", "draws"} or None}; None when not drawn.
        bins: the reliability bins; () without confidences (or calibration).
        curve: (coverage, risk, thresholds), each (K,); None without confidences (or
            calibration).
        confidences: (N,) the headline reading's scored confidences (unparsable sampled ones as
            `unparsable_confidence`); None without confidences. correct: (N,) bool.
            unparsable: how many sampled confidences did not parse, whichever the reading.
    """

    name: str
    mode: str
    reading: str
    with_confidence: bool
    calibration_unavailable: str | None
    n_bins: int
    unparsable_confidence: float
    metrics: Mapping[str, float | int | str | None]
    by_group: Mapping[str, Mapping[str, Any]] | None
    extra_scores: Mapping[str, float]
    within_group_auroc: float | None
    baselines: Mapping[str, Any] | None
    bootstrap: Mapping[str, Any] | None
    bins: tuple[ReliabilityBin, ...]
    curve: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    confidences: np.ndarray | None
    correct: np.ndarray
    unparsable: int

    def to_metrics(self) -> dict[str, Any]:
        """The metrics.json object (`calibrl.evaluation.report`), a fresh copy each call."""
        out: dict[str, Any] = {"name": self.name, "mode": self.mode, **self.metrics}
        if self.with_confidence:
            out["confidence_reading"] = self.reading
        if self.by_group is not None:
            out["by_group"] = self.by_group
        if self.extra_scores:
            out["extra_scores"] = self.extra_scores
        if self.baselines is not None:
            out["within_group_auroc"] = self.within_group_auroc
            out["baselines"] = self.baselines
        if self.bootstrap is not None:
            out["bootstrap"] = self.bootstrap
        return copy.deepcopy(out)


def _expected_recorded(arrays: RecordArrays) -> bool:
    """Whether the records carry expected values or why they lack them (else the evaluation
    never read them, as records written before they existed, and the reference is left out)."""
    return bool(arrays.expected_unavailable) or not np.isnan(arrays.expected).all()


def compute_evaluation(
    records: Iterable[Any],
    *,
    name: str,
    mode: str,
    with_confidence: bool,
    n_bins: int = DEFAULT_N_BINS,
    unparsable_confidence: float = UNPARSABLE_CONFIDENCE,
    clusters: Sequence[Any] | None = None,
    bootstrap: int = 0,
    reading: str = SAMPLED,
) -> EvaluationResult:
    """Everything one evaluation of `records` reports, computed once (module docstring).

    Args:
        records: `EvalRecord`s or dicts (`calibrl.evaluation.records`), N of them.
        name, mode: saved with the metrics. with_confidence: the mode states a confidence.
        n_bins: ECE and reliability bins. unparsable_confidence: what an unparsable one scores.
        clusters: (N,) each record's problem: it fits the cross-fitted difficulty table and is
            what the bootstrap resamples; None: every answer its own problem, and no bootstrap.
        bootstrap: draws of the bootstrap (0: none). Without confidences only accuracy's
            interval is kept (every confidence reads as unparsable), and so when calibration
            is not available.
        reading: the reading of the stated confidence the headline scores (`RecordArrays.stated`:
            "sampled" or "expected"); the other is reported beside it in "baselines".

    "by_group" is reported only when some record has a `group`, so runs without difficulty
    labels keep the metrics.json they always had; with confidences "within_group_auroc" and the
    references come with it.
    """
    arrays = record_arrays(records)  # the one walk over the records
    options = dict(with_confidence=with_confidence, n_bins=n_bins,
                   unparsable_confidence=unparsable_confidence, reading=reading)
    conf, correct = arrays.stated(reading, unparsable_confidence)[0], arrays.correct
    groups = arrays.groups if arrays.grouped else None
    metrics = summarize(arrays, **options)
    unavailable = metrics.get(UNAVAILABLE)
    calibrated = with_confidence and unavailable is None  # the stated value's metrics exist
    extras = mean_extra_scores(arrays)
    by_group = summarize_by_group(arrays, **options) if arrays.grouped else None
    within, baselines = None, None
    if arrays.grouped and with_confidence:
        if calibrated:
            within = within_group_auroc(conf, correct, arrays.groups)[0]
        baselines = baseline_metrics(
            correct, arrays.groups, clusters if clusters is not None else range(len(arrays)),
            arrays.likelihood, n_bins, arrays.readout)
        other = EXPECTED if reading == SAMPLED else SAMPLED
        if other == SAMPLED or _expected_recorded(arrays):
            baselines[reading_key(other)] = reading_reference(
                *arrays.stated(other, unparsable_confidence), correct, arrays.groups, other,
                n_bins)
    intervals = None
    if clusters is not None and bootstrap > 0:
        intervals = bootstrap_intervals(conf, correct, clusters, groups=groups, draws=bootstrap,
                                        n_bins=n_bins)
        if not calibrated:
            intervals = {"accuracy": intervals["accuracy"]}
        else:
            intervals[CALIBRATED_ECE] = calibrated_ece(conf, draws=bootstrap, n_bins=n_bins)
    return EvaluationResult(
        name=name, mode=mode, reading=reading, with_confidence=with_confidence,
        calibration_unavailable=unavailable, n_bins=n_bins,
        unparsable_confidence=unparsable_confidence, metrics=metrics,
        by_group=by_group, extra_scores=extras, within_group_auroc=within, baselines=baselines,
        bootstrap=intervals,
        bins=tuple(reliability_bins(conf, correct, n_bins)) if calibrated else (),
        curve=risk_coverage(conf, correct) if calibrated else None,
        confidences=conf if with_confidence else None, correct=correct,
        unparsable=int((~arrays.parsable).sum()))
