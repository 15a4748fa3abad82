"""The flat metrics of one evaluation, overall and per difficulty group, from `RecordArrays`.

Every function here takes records (converted once, `record_arrays`) or the arrays themselves,
so `compute_evaluation` converts once and summarises the whole and each group from the arrays.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from calibrl.evaluation.metrics import (
    DEFAULT_N_BINS,
    UNPARSABLE_CONFIDENCE,
    aurc,
    auroc,
    brier_score,
    check_n_bins,
    expected_calibration_error,
    natural_key,
)
from calibrl.evaluation.records import SAMPLED, RecordArrays, record_arrays

# The keys of `summarize`, i.e. of every metrics.json.
METRIC_KEYS = (
    "count", "accuracy", "ece", "brier", "auroc", "aurc", "mean_confidence",
    "unparsable_confidence_rate", "format_failure_rate", "mean_answer_len", "mean_conf_len",
    "n_bins",
)
# Beside them when the stated confidence's metrics are not available: the reason (a string).
UNAVAILABLE = "calibration_unavailable"


def as_arrays(data: Iterable[Any] | RecordArrays) -> RecordArrays:
    """`data` itself when it is already `RecordArrays`, else its records converted."""
    return data if isinstance(data, RecordArrays) else record_arrays(data)


def _mean_set(values: np.ndarray) -> float | None:
    """Mean of the entries that are set (not NaN), shape (N,) -> scalar; None when none is."""
    values = values[~np.isnan(values)]
    return float(np.mean(values)) if values.size else None


def summarize(
    data: Iterable[Any] | RecordArrays,
    *,
    with_confidence: bool = True,
    n_bins: int = DEFAULT_N_BINS,
    unparsable_confidence: float = UNPARSABLE_CONFIDENCE,
    reading: str = SAMPLED,
) -> dict[str, float | int | str | None]:
    """The flat metrics dict of one evaluation, keys `METRIC_KEYS` (and `UNAVAILABLE`).

    Args:
        data: `RecordArrays`, or records (`EvalRecord`s or dicts with `correct`, `confidence`,
            `format_ok`, `answer_len`, optionally `conf_len`), converted once.
        with_confidence: False for modes that ask for no confidence (plain RLVR): every
            calibration metric, the unparsable rate and `mean_conf_len` are then None.
        n_bins: ECE bins.
        unparsable_confidence: the confidence an unparsable one is scored as (`metrics`).
        reading: which reading of the stated confidence the calibration metrics score
            (`RecordArrays.stated`: "sampled" or "expected"); the unparsable rate is always the
            sampled text's.

    Rates are shares in [0, 1]. `auroc` is None when all answers are correct or all wrong.
    When the reading is not available (sampled: too few confidences parsed,
    `metrics.calibration_unavailable`; expected: some answer has none) the metrics of the
    stated confidence (`CONFIDENCE_METRICS`) are None and `UNAVAILABLE` says why; the
    unparsable rate and `mean_conf_len` are still reported.
    Records may carry a `group`; `summarize` ignores it (see `summarize_by_group`).
    """
    arrays = as_arrays(data)
    if not len(arrays):
        raise ValueError("no examples to evaluate")
    check_n_bins(n_bins)
    conf, reason = arrays.stated(reading, unparsable_confidence)
    correct = arrays.correct
    out: dict[str, float | int | str | None] = {
        "count": len(arrays),
        "accuracy": float(correct.mean()),
        "ece": None,
        "brier": None,
        "auroc": None,
        "aurc": None,
        "mean_confidence": None,
        "unparsable_confidence_rate": None,
        "format_failure_rate": float(1.0 - arrays.format_ok.mean()),
        "mean_answer_len": _mean_set(arrays.answer_len),
        "mean_conf_len": None,
        "n_bins": n_bins,
    }
    if not with_confidence:
        return out
    out.update(unparsable_confidence_rate=float(1.0 - arrays.parsable.mean()),
               mean_conf_len=_mean_set(arrays.conf_len))
    if reason is not None:
        out[UNAVAILABLE] = reason
        return out
    out.update(
        ece=expected_calibration_error(conf, correct, n_bins),
        brier=brier_score(conf, correct),
        auroc=auroc(conf, correct),
        aurc=aurc(conf, correct),
        mean_confidence=float(conf.mean()),
    )
    return out


def mean_extra_scores(data: Iterable[Any] | RecordArrays) -> dict[str, float]:
    """Each extra score's mean over the records that have it, by name ({} when none has any)."""
    means = {name: _mean_set(values) for name, values in as_arrays(data).extra_scores.items()}
    return {name: mean for name, mean in means.items() if mean is not None}


def group_rows(arrays: RecordArrays) -> dict[str, np.ndarray]:
    """{label: (N,) bool mask of its records}, labels in `natural_key` order."""
    return {label: arrays.groups == label
            for label in sorted(set(arrays.groups.tolist()), key=natural_key)}


def summarize_by_group(
    data: Iterable[Any] | RecordArrays,
    *,
    with_confidence: bool = True,
    n_bins: int = DEFAULT_N_BINS,
    unparsable_confidence: float = UNPARSABLE_CONFIDENCE,
    reading: str = SAMPLED,
) -> dict[str, dict[str, float | int | str | None]]:
    """`summarize` of each group's records, keyed by group label in `natural_key` order, with
    the group's "extra_scores" when the task has any (`mean_extra_scores`).

    Records without a group are reported under `NO_GROUP`. Arguments as in `summarize`.
    """
    arrays = as_arrays(data)
    with_extras = bool(mean_extra_scores(arrays))
    out = {}
    for label, rows in group_rows(arrays).items():
        part = arrays.take(rows)
        out[label] = summarize(part, with_confidence=with_confidence, n_bins=n_bins,
                               unparsable_confidence=unparsable_confidence, reading=reading)
        if with_extras:  # the task's own scores (e.g. token F1) per group too
            out[label]["extra_scores"] = mean_extra_scores(part)
    return out
