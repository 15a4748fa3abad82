"""Proper scoring losses on a stated confidence, read from the model's distribution over the
tokens that can write its value (the confidence warm-up, `calibrl calibrate`).

The stated value is one token chosen among K value tokens (the tenths "0.0" ... "0.9" write one
digit after "0."): `value_logits` are the model's logits at that position restricted to those K
tokens, renormalised over them. Each loss returns one value per row; the caller averages.

- `expected_brier`: E_{v ~ p}[(v - y)^2], the Brier score the stated value gets in expectation
  when it is sampled (ConfTuner's tokenized Brier). Linear in p, so for a row whose outcome has
  probability q it is least with all mass on the value nearest q: it trains a sharp, calibrated
  stated value, not a spread one.
- `nearest_value_ce`: cross-entropy to the value token nearest the target (ties to the lower).
  With 0/1 targets it is log-loss on two tokens; with a fractional target (agreement over
  resamples) it is plain SFT on the rounded target.

The targets other than the grade are estimates the model makes of itself: `agreement` with its
other samples, `mapped_targets` (a score mapped to the accuracy at it) and
`held_out_binned_targets` (a score such as the answer's likelihood mapped to the accuracy of
other prompts' answers with a similar score).

`value_mass_nll` is the format part: -log of the probability mass the full vocabulary puts on
the K value tokens, so renormalising over them cannot hide mass drifting to other tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

ConfidenceLoss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def expected_brier(value_logits: torch.Tensor, values: torch.Tensor, targets: torch.Tensor
                   ) -> torch.Tensor:
    """Expected Brier score of the sampled value.

    value_logits: [B, K] logits of the K value tokens. values: [K] the value each token writes.
    targets: [B] outcomes or target probabilities in [0, 1]. Returns [B] in [0, 1].
    """
    p = torch.softmax(value_logits.float(), dim=-1)  # [B, K]
    sq = (values.float()[None, :] - targets.float()[:, None]) ** 2  # [B, K]
    return (p * sq).sum(-1)  # [B]


def nearest_value_index(values: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """[B] index into `values` ([K]) of the value nearest each target ([B]); ties to the first."""
    return (values.float()[None, :] - targets.float()[:, None]).abs().argmin(-1)  # [B]


def nearest_value_ce(value_logits: torch.Tensor, values: torch.Tensor, targets: torch.Tensor
                     ) -> torch.Tensor:
    """Cross-entropy of the value token nearest the target. Shapes as `expected_brier`."""
    index = nearest_value_index(values, targets)  # [B]
    return F.cross_entropy(value_logits.float(), index, reduction="none")  # [B]


CONFIDENCE_LOSSES: dict[str, ConfidenceLoss] = {
    "expected_brier": expected_brier,
    "nearest_value_ce": nearest_value_ce,
}


def value_mass_nll(logits: torch.Tensor, value_ids: torch.Tensor) -> torch.Tensor:
    """-log sum_k p(value token k) under the full softmax.

    logits: [B, V] at the value position. value_ids: [K] token ids. Returns [B], >= 0.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)  # [B, V]
    return -torch.logsumexp(logp[:, value_ids], dim=-1)  # [B]


def expected_value(value_logits: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """E_{v ~ p}[v]: [B] from value_logits [B, K] and values [K] (a score for rankings)."""
    return (torch.softmax(value_logits.float(), dim=-1) * values.float()[None, :]).sum(-1)


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
