"""Recalibration: a monotone map of the stated confidence, fitted on the final model's answers
to questions no stage trained on, applied to another evaluation's answers (Platt scaling).

Why: the stated value's order and its level are learnt apart. On the real model the confidence
warm-up and RL move the level in steps of their own per seed (benchmarks/rl: the mean stated
value ends at 0.04-0.59 for answers 21-31 % right), while the order is what the stated value
reads of the answer. A logistic regression on the value's log-odds, fitted on answers to
held-back training questions (the test split's mix of groups, never trained on), moves the level
and keeps the order: ECE and Brier change, AUROC and within-group AUROC do not (ties aside).
It is a reading of the stated value, reported beside it, never in its place: each mapped record
keeps the stated value as `stated_before_recalibration`.

Platt's targets are smoothed ((k+1)/(k+2) for the k right answers, 1/(m+2) for the m wrong
ones), so the map stays finite when every fitted answer is right, or wrong.

Shapes: N answers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

from calibrl.algo.readout import fit_logistic
from calibrl.evaluation.records import EXPECTED, SAMPLED, valid_confidence

LOG_ODDS_CLIP = 1e-4  # a stated 0.0 or 1.0 is read as 1e-4 or 1 - 1e-4: finite log-odds
BEFORE_KEY = "stated_before_recalibration"
READING_KEYS = {EXPECTED: "stated_expected", SAMPLED: "confidence"}


def log_odds(p: np.ndarray) -> np.ndarray:
    """(N,) log(p / (1 - p)) of `p` clipped to [LOG_ODDS_CLIP, 1 - LOG_ODDS_CLIP]."""
    p = np.clip(np.asarray(p, dtype=np.float64), LOG_ODDS_CLIP, 1 - LOG_ODDS_CLIP)
    return np.log(p) - np.log1p(-p)


@dataclasses.dataclass(frozen=True)
class PlattMap:
    """p -> sigmoid(slope * log_odds(p) + intercept), fitted on `answers` answers of which a
    share `rate` was right."""

    slope: float
    intercept: float
    answers: int
    rate: float

    def __call__(self, p: np.ndarray) -> np.ndarray:
        """(N,) the mapped confidences of (N,) confidences in [0, 1]."""
        z = self.slope * log_odds(p) + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def to_dict(self) -> dict[str, Any]:
        return {"method": "platt", **dataclasses.asdict(self)}


def smoothed_targets(correct: np.ndarray) -> np.ndarray:
    """(N,) Platt's targets: (k+1)/(k+2) for each of the k right answers, 1/(m+2) for each of
    the m wrong ones."""
    correct = np.asarray(correct, dtype=bool)
    k, m = int(correct.sum()), int((~correct).sum())
    return np.where(correct, (k + 1) / (k + 2), 1 / (m + 2))


def fit_platt(confidence: np.ndarray, correct: np.ndarray) -> PlattMap:
    """The map minimising the mean cross-entropy of `smoothed_targets(correct)` under
    sigmoid(slope * log_odds(confidence) + intercept) with slope >= 0 (a stated value that
    ranks the fitted answers backwards gets the flat map). confidence: (N,) in [0, 1], N > 0;
    correct: (N,) bool. `ValueError` on no answers or a confidence outside [0, 1] (NaN
    included): the caller leaves out the answers whose reading is missing."""
    conf = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    if conf.size == 0 or conf.shape != correct.shape:
        raise ValueError("fit_platt needs one correctness per confidence, and at least one")
    if not np.all((conf >= 0) & (conf <= 1)):
        raise ValueError("fit_platt reads confidences in [0, 1] (NaN is not one)")
    targets = smoothed_targets(correct)
    w, b = fit_logistic(torch.as_tensor(log_odds(conf))[:, None], torch.as_tensor(targets),
                        l2=0.0)
    slope, intercept = float(w[0]), float(b)
    if slope < 0:  # a map may not reverse the order; the best flat one states the mean target
        slope, intercept = 0.0, float(log_odds(np.array([targets.mean()]))[0])
    return PlattMap(slope=slope, intercept=intercept, answers=int(conf.size),
                    rate=float(correct.mean()))


def reading_values(records: Iterable[Mapping[str, Any]], reading: str
                   ) -> tuple[np.ndarray, np.ndarray]:
    """((K,) the records' confidences under `reading`, (K,) their correctness) for the K
    records whose reading is a confidence in [0, 1] (a missing or unparsable one is left
    out: it has no value to map)."""
    key = READING_KEYS[reading]
    pairs = [(valid_confidence(r.get(key)), bool(r["correct"])) for r in records]
    kept = [(c, y) for c, y in pairs if c is not None]
    return (np.array([c for c, _ in kept], dtype=np.float64),
            np.array([y for _, y in kept], dtype=bool))


def recalibrated_records(records: Iterable[Mapping[str, Any]], platt: PlattMap, reading: str
                         ) -> list[dict[str, Any]]:
    """Copies of `records` with the `reading`'s value mapped by `platt` and the stated one kept
    as `BEFORE_KEY`; a record without a value in [0, 1] under it is copied as it is."""
    key = READING_KEYS[reading]
    rows = [dict(record) for record in records]
    values = [valid_confidence(row.get(key)) for row in rows]
    kept = [i for i, value in enumerate(values) if value is not None]
    mapped = platt(np.array([values[i] for i in kept], dtype=np.float64))  # one call, (K,)
    for i, value in zip(kept, mapped, strict=True):
        rows[i][BEFORE_KEY] = values[i]
        rows[i][key] = float(value)
    return rows
