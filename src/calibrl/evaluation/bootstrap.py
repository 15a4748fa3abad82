"""How precisely an evaluation measures its metrics: a bootstrap over the evaluated problems.

With a few hundred problems, ECE and AUROC move by a hundredth or more when other problems are
drawn, so a table that compares runs (or a target such as "ECE <= 0.05") needs that size beside
it. The problems are resampled with replacement, each with all of its answers (the samples of
one prompt are not independent), and every metric is recomputed on each draw; reported are the
standard deviation over the draws (the standard error) and the percentile interval. Binned ECE
is biased upwards on small samples, so its interval is not centred on the point estimate;
`calibrated_ece` measures that bias: the ECE a reading calibrated by construction shows on as
many answers with the same confidences, the floor against which an ECE target can be judged.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibrl.evaluation.baselines import within_group_auroc
from calibrl.evaluation.metrics import (
    DEFAULT_N_BINS,
    aurc,
    auroc,
    brier_score,
    check_arrays,
    expected_calibration_error,
)

BOOTSTRAP_METRICS = ("accuracy", "ece", "brier", "auroc", "aurc", "within_group_auroc")
LEVEL = 0.95  # the interval every evaluation saves
CALIBRATED_ECE = "ece_if_calibrated"  # saved beside the intervals: `calibrated_ece`


def _metrics(conf: np.ndarray, correct: np.ndarray, groups: np.ndarray | None, n_bins: int
             ) -> dict[str, float | None]:
    return {"accuracy": float(correct.mean()),
            "ece": expected_calibration_error(conf, correct, n_bins),
            "brier": brier_score(conf, correct), "auroc": auroc(conf, correct),
            "aurc": aurc(conf, correct),
            "within_group_auroc": (None if groups is None
                                   else within_group_auroc(conf, correct, groups)[0])}


def bootstrap_intervals(
    confidences: Any, correct: Any, clusters: Any, *, groups: Any = None, draws: int = 1000,
    seed: int = 0, level: float = LEVEL, n_bins: int = DEFAULT_N_BINS,
) -> dict[str, dict[str, float] | None]:
    """Standard error and percentile interval of each of `BOOTSTRAP_METRICS`.

    Args:
        confidences, correct: shape (N,), as every metric takes them (unparsable confidences
            already replaced, see `calibration_arrays`).
        clusters: shape (N,), the problem (or cluster of problems) each answer belongs to;
            one draw resamples clusters.
        groups: shape (N,), difficulty labels for "within_group_auroc"; None leaves it None.
        draws: bootstrap resamples (> 0); seed: their random generator's seed.
        level: the interval's coverage, e.g. 0.95 for the 2.5th-97.5th percentiles.

    Returns:
        {metric: {"se", "low", "high", "draws"}}; `draws` counts the resamples where the metric
        was defined (AUROC needs right and wrong answers); None for a metric never defined.
    """
    conf, corr = check_arrays(confidences, correct)
    if np.shape(clusters) != conf.shape:
        raise ValueError(f"clusters has shape {np.shape(clusters)}, expected {conf.shape}")
    if draws <= 0:
        raise ValueError("draws must be positive")
    if not 0.0 < level < 1.0:
        raise ValueError("level must be within (0, 1)")
    labels = None if groups is None else np.asarray([str(g) for g in groups])
    _, members = np.unique(np.asarray(clusters), return_inverse=True)
    rows_of = [np.flatnonzero(members == g) for g in range(members.max() + 1)]
    rng = np.random.default_rng(seed)
    values: dict[str, list[float]] = {name: [] for name in BOOTSTRAP_METRICS}
    for _ in range(draws):
        picked = rng.integers(0, len(rows_of), size=len(rows_of))
        rows = np.concatenate([rows_of[g] for g in picked])
        drawn = None if labels is None else labels[rows]
        for name, value in _metrics(conf[rows], corr[rows], drawn, n_bins).items():
            if value is not None:
                values[name].append(value)
    tail = (1.0 - level) / 2 * 100
    out: dict[str, dict[str, float] | None] = {}
    for name, vals in values.items():
        if not vals:
            out[name] = None
            continue
        low, high = np.percentile(vals, [tail, 100 - tail])
        out[name] = {"se": float(np.std(vals)), "low": float(low), "high": float(high),
                     "draws": len(vals)}
    return out


def calibrated_ece(confidences: Any, *, draws: int = 1000, seed: int = 0, level: float = LEVEL,
                   n_bins: int = DEFAULT_N_BINS) -> dict[str, float]:
    """The ECE a calibrated reading would show here: each answer's outcome drawn as right with
    probability its confidence (so the reading is calibrated by construction), `draws` times.

    Args:
        confidences: shape (N,), in [0, 1].
        draws: outcome draws (> 0); seed: their generator's seed; level: the interval's coverage.

    Returns:
        {"mean", "se", "low", "high", "draws"} of the ECE over the draws. A measured ECE near
        "mean" is as calibrated as N answers can show; answers of one problem that share their
        outcome (not drawn so here) would raise the floor further, so it is a lower bound.
    """
    conf, _ = check_arrays(confidences, np.zeros(np.shape(confidences)))
    if draws <= 0:
        raise ValueError("draws must be positive")
    if not 0.0 < level < 1.0:
        raise ValueError("level must be within (0, 1)")
    rng = np.random.default_rng(seed)
    values = [expected_calibration_error(conf, (rng.random(conf.size) < conf).astype(float),
                                         n_bins) for _ in range(draws)]
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return {"mean": float(np.mean(values)), "se": float(np.std(values)), "low": float(low),
            "high": float(high), "draws": draws}
