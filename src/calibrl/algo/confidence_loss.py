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
- `brier_of_expected`: (E_p[v] - y)^2, the Brier score of the expected value, the reading
  `eval.confidence_reading: expected` reports. It is `expected_brier` less the variance of the
  value under p (E_p[(v - y)^2] = (E_p[v] - y)^2 + Var_p(v)): proper for the expected value
  (least at E_p[v] = the row's chance, up to the largest value), and nothing in it pays for a
  sharp distribution. Nothing keeps the mass spread either: the quickest way to the base rate
  is still one value's logit, and where the mass sits on one value the gradient vanishes.

The targets other than the grade, estimates the model makes of itself, are in
`calibrl.algo.self_estimates`.

`value_mass_nll` is the format part: -log of the probability mass the full vocabulary puts on
the K value tokens, so renormalising over them cannot hide mass drifting to other tokens.
"""

from __future__ import annotations

from collections.abc import Callable

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


def brier_of_expected(value_logits: torch.Tensor, values: torch.Tensor, targets: torch.Tensor
                      ) -> torch.Tensor:
    """Brier score of the expected value. Shapes as `expected_brier`; returns [B] in [0, 1]."""
    return (expected_value(value_logits, values) - targets.float()) ** 2  # [B]


CONFIDENCE_LOSSES: dict[str, ConfidenceLoss] = {
    "expected_brier": expected_brier,
    "nearest_value_ce": nearest_value_ce,
    "brier_of_expected": brier_of_expected,
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
