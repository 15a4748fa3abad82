"""Scores a model gives of its own answers without stating them, and how one is mapped to a
probability on other prompts (the confidence warm-up's targets, the evaluation's references).

- `answer_likelihood`: exp of the mean token log-prob of a sampled answer (how peaked the
  model's distribution was along it).
- `agreement`: the share of the prompt's other samples that give the same answer.
- `mapped_targets`: a score mapped to the accuracy of all answers with the same score;
  `held_out_binned_targets`: a continuous score mapped to the accuracy of other folds' answers
  with a similar score, folds by `cluster_folds` (a cluster's answers share a fold, so nothing
  learned from one question of a cluster scores another).
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence

import numpy as np

FOLDS = 5  # cross-fitting folds of the readout reference and of held-out targets


def answer_likelihood(logprobs: Sequence[float] | None) -> float | None:
    """`exp(mean token log-prob)` of one answer in [0, 1]; None without (finite) log-probs."""
    if not logprobs:
        return None
    mean = float(np.mean(np.asarray(logprobs, dtype=np.float64)))
    return min(1.0, math.exp(mean)) if math.isfinite(mean) else None


def cluster_folds(clusters: Sequence[Hashable], folds: int = FOLDS, seed: int = 0
            ) -> np.ndarray:
    """[N] fold index per answer; a cluster's answers share a fold (clusters shuffled, seeded)."""
    names = sorted({str(c) for c in clusters})
    random.Random(seed).shuffle(names)
    fold = {name: i % folds for i, name in enumerate(names)}
    return np.asarray([fold[str(c)] for c in clusters], dtype=np.int64)


def agreement(keys: Sequence[Hashable | None]) -> list[float]:
    """For each of a prompt's answers, the share of the prompt's *other* answers with the same
    key (an extracted, normalised answer; None = no answer, agrees with nothing). A prompt with
    one answer gives 0.0. Returns one value per key, in order."""
    out = []
    for i, key in enumerate(keys):
        others = [k for j, k in enumerate(keys) if j != i]
        same = sum(1 for k in others if key is not None and k == key)
        out.append(same / len(others) if others else 0.0)
    return out


def mapped_targets(scores: Sequence[float], correct: Sequence[bool]) -> list[float]:
    """Each answer's score mapped to a probability: the share of right answers among all the
    answers with the same score (scores take few values, e.g. agreement with 3 others: 0, 1/3,
    2/3, 1). A calibrated version of a self-estimate, fitted on the graded training answers:
    agreement alone says 0.5 where a model guesses one name for an unknown fact half of the
    time, though such answers are almost never right. Returns one target per answer."""
    if len(scores) != len(correct):
        raise ValueError(f"{len(scores)} scores for {len(correct)} grades")
    right: dict[float, list[int]] = {}
    for score, ok in zip(scores, correct, strict=True):
        tally = right.setdefault(float(score), [0, 0])
        tally[0] += bool(ok)
        tally[1] += 1
    return [right[float(s)][0] / right[float(s)][1] for s in scores]


def held_out_binned_targets(scores: Sequence[float], correct: Sequence[bool],
                            folds: Sequence[int], bins: int = 10) -> list[float]:
    """Each answer's score (e.g. its likelihood) mapped to a probability on *other* prompts:
    for the answers of fold k, the other folds' scores are cut into `bins` equal-count bins and
    an answer's target is the share of right answers among the other folds' answers in its bin
    (histogram binning, cross-fitted, so no answer's target counts its own grade). A bin with
    no other-fold answers gets the other folds' accuracy.

    scores, correct, folds: (N,) per answer; folds keep a prompt's (or a cluster's) answers
    together. Returns N targets in [0, 1]."""
    if not len(scores) == len(correct) == len(folds):
        raise ValueError(f"{len(scores)} scores, {len(correct)} grades, {len(folds)} folds")
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    fold = np.asarray(folds)
    if len(np.unique(fold)) < 2:
        raise ValueError("held-out targets need answers in at least two folds")
    score = np.asarray(scores, dtype=np.float64)
    right = np.asarray(correct, dtype=np.float64)
    out = np.empty(len(score))
    for k in np.unique(fold):
        held, fit = fold == k, fold != k
        inner = np.quantile(score[fit], np.linspace(0, 1, bins + 1)[1:-1])  # bins - 1 edges
        fit_bin = np.searchsorted(inner, score[fit], side="right")
        held_bin = np.searchsorted(inner, score[held], side="right")
        total = np.bincount(fit_bin, minlength=bins)
        hits = np.bincount(fit_bin, weights=right[fit], minlength=bins)
        rate = np.where(total > 0, hits / np.maximum(total, 1), right[fit].mean())
        out[held] = rate[held_bin]
    return out.tolist()
