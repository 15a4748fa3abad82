"""What a stated confidence must beat: a model-free difficulty table and the answer's likelihood.

A confidence that only says "3-number problems are hard" scores well on ECE, Brier and AUROC when
difficulties differ, without knowing anything about the answer in front of it. Two baselines make
that visible beside every evaluation:

- **difficulty table**: confidence = the accuracy of the answer's difficulty group. It is
  cross-fitted over problems (`TABLE_FOLDS` folds, a problem's answers always in one fold): an
  answer's table value is its group's accuracy on the *other* folds' answers, so no answer is
  scored with a table it helped fit. A group absent from the other folds gets their overall
  accuracy.
- **answer likelihood**: the geometric-mean probability of the sampled answer's tokens under the
  model that sampled it, `exp(mean token log-prob)` (the sampler's log-probs: under the sampling
  temperature, before top-k/top-p). It is never an input to the stated confidence; its AUROC is
  how much the model "knows" about its answer whether or not it says it.

Beside them, the stated confidence read the other way than the headline (`reading_reference`):
the expected value over the tenths when the headline is the sampled value, or the sampled value
when it is the expected one (`calibrl.evaluation.stated_value`).

**Within-group AUROC** ranks inside each difficulty group only: the AUROC of each group that has
right and wrong answers, averaged with weights = the group's number of answers. A table is 0.5
there by construction; a confidence that knows the answer is above it.

Shapes: every array is (N,), one entry per evaluated answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from calibrl.algo.readout import READOUT_FIT
from calibrl.evaluation.metrics import (
    DEFAULT_N_BINS,
    aurc,
    auroc,
    brier_score,
    check_arrays,
    expected_calibration_error,
    natural_key,
)
from calibrl.evaluation.records import READING_NAMES
from calibrl.evaluation.summary import UNAVAILABLE

TABLE_FOLDS = 5
TABLE_FIT = (f"cross-fitted: each answer gets its difficulty group's accuracy on the other "
             f"{TABLE_FOLDS - 1} of {TABLE_FOLDS} folds of the evaluated problems")


def within_group_auroc(scores: Any, correct: Any, groups: Sequence[Any]
                       ) -> tuple[float | None, dict[str, float | None]]:
    """(size-weighted mean of the per-group AUROCs, {group: AUROC}) of `scores`.

    Groups with only right or only wrong answers have AUROC None and are left out of the mean;
    the mean is None when no group has both. Groups are keyed by `str(label)`, natural order.
    """
    conf, corr = check_arrays(scores, correct)
    labels = np.asarray([str(g) for g in groups])
    if labels.shape != conf.shape:
        raise ValueError(f"{labels.size} group labels for {conf.size} answers")
    per_group: dict[str, float | None] = {}
    total = weight = 0.0
    for label in sorted(set(labels.tolist()), key=natural_key):
        rows = labels == label
        value = auroc(conf[rows], corr[rows])
        per_group[label] = value
        if value is not None:
            total += value * rows.sum()
            weight += rows.sum()
    return (float(total / weight) if weight else None), per_group


def difficulty_table_confidences(correct: Any, groups: Sequence[Any], clusters: Sequence[Any],
                                 folds: int = TABLE_FOLDS) -> np.ndarray:
    """The cross-fitted table confidence of each answer (module docstring), shape (N,).

    Args:
        correct: (N,) bool or 0/1. groups: (N,) difficulty labels. clusters: (N,) the problem
            of each answer; problems are dealt to folds in order of first appearance.
    """
    _, corr = check_arrays(np.zeros(len(correct)), correct)
    labels = np.asarray([str(g) for g in groups])
    problems = list(dict.fromkeys(clusters))  # first-appearance order
    fold_of_problem = {p: i % folds for i, p in enumerate(problems)}
    fold = np.asarray([fold_of_problem[c] for c in clusters])
    if labels.shape != corr.shape or fold.shape != corr.shape:
        raise ValueError("correct, groups and clusters must have one entry per answer")
    out = np.empty_like(corr)
    for k in range(folds):
        held, fit = fold == k, fold != k
        if not held.any():
            continue
        overall = float(corr[fit].mean()) if fit.any() else float(corr.mean())
        for label in set(labels[held].tolist()):
            rows = fit & (labels == label)
            out[held & (labels == label)] = float(corr[rows].mean()) if rows.any() else overall
    return out


def complete_scores(values: Any) -> np.ndarray | None:
    """(N,) float scores when every answer has one, else None (a reference needs them all).
    `values`: (N,) floats with None or NaN for a missing score, or None."""
    if values is None:
        return None
    scores = np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
    return scores if scores.size and not np.isnan(scores).any() else None


def baseline_metrics(correct: Any, groups: Sequence[Any], clusters: Sequence[Any],
                     likelihoods: Any, n_bins: int = DEFAULT_N_BINS,
                     readouts: Any = None) -> dict[str, Any]:
    """The "baselines" block of metrics.json.

    Args:
        correct, groups, clusters: (N,) as in `difficulty_table_confidences`.
        likelihoods, readouts: (N,) each answer's answer likelihood and readout score (NaN or
            None where missing; `RecordArrays.likelihood` and `.readout`), or None.

    Returns {"difficulty_table": {"fit", "ece", "brier", "auroc", "aurc"},
             "answer_likelihood": {"auroc", "within_group_auroc", "by_group": {label: auroc}}
             or None when some answer has no likelihood,
             "readout": {"fit", "ece", "brier", "auroc", "within_group_auroc", "aurc",
             "by_group"} or None when some answer has no readout (`calibrl.algo.readout`)}.
    """
    _, corr = check_arrays(np.zeros(len(correct)), correct)
    table = difficulty_table_confidences(corr, groups, clusters)
    out: dict[str, Any] = {"difficulty_table": {
        "fit": TABLE_FIT, "ece": expected_calibration_error(table, corr, n_bins),
        "brier": brier_score(table, corr), "auroc": auroc(table, corr), "aurc": aurc(table, corr),
    }, "answer_likelihood": None}
    scores = complete_scores(likelihoods)
    if scores is not None:
        mean, per_group = within_group_auroc(scores, corr, groups)
        out["answer_likelihood"] = {"auroc": auroc(scores, corr), "within_group_auroc": mean,
                                    "by_group": per_group}
    out["readout"] = None
    probs = complete_scores(readouts)
    if probs is not None:
        out["readout"] = {"fit": READOUT_FIT, **probability_scores(probs, corr, groups, n_bins)}
    return out


def probability_scores(probs: np.ndarray, corr: np.ndarray, groups: Sequence[Any],
                       n_bins: int) -> dict[str, Any]:
    """{"ece", "brier", "auroc", "within_group_auroc", "aurc", "by_group"} of (N,) confidences
    in [0, 1] against (N,) bool `corr` (a reference read as a probability)."""
    mean, per_group = within_group_auroc(probs, corr, groups)
    return {"ece": expected_calibration_error(probs, corr, n_bins),
            "brier": brier_score(probs, corr), "auroc": auroc(probs, corr),
            "within_group_auroc": mean, "aurc": aurc(probs, corr), "by_group": per_group}


def reading_key(reading: str) -> str:
    """The "baselines" key of a reading of the stated confidence: "stated_expected", ..."""
    return f"stated_{reading}"


def reading_reference(scores: Any, unavailable: str | None, correct: Any, groups: Sequence[Any],
                      reading: str, n_bins: int = DEFAULT_N_BINS) -> dict[str, Any]:
    """The `reading_key(reading)` block of "baselines": the stated confidence read as `reading`
    (`RecordArrays.stated`), scored on the answers the headline is scored on.

    Args:
        scores: (N,) that reading's confidences in [0, 1]. unavailable: why it is not
            available, or None. correct, groups: (N,) as in `within_group_auroc`.

    Returns {"reading": its table name, "ece", "brier", "auroc", "within_group_auroc", "aurc",
    "mean_confidence", "by_group": {label: auroc}}; when `unavailable`, the numbers are None,
    "by_group" is {} and `UNAVAILABLE` says why.
    """
    out: dict[str, Any] = {"reading": READING_NAMES[reading]}
    if unavailable is not None:
        return {**out, **dict.fromkeys(("ece", "brier", "auroc", "within_group_auroc", "aurc",
                                        "mean_confidence")), "by_group": {},
                UNAVAILABLE: unavailable}
    conf, corr = check_arrays(scores, correct)
    return {**out, **probability_scores(conf, corr, groups, n_bins),
            "mean_confidence": float(conf.mean())}
