"""The clipped policy-gradient loss (PPO / GRPO surrogate), on `[B, R]` response tensors.

Per token, with `r = exp(logp - old_logp)` and advantage `A`:

    l = -min(r * A, clip(r, 1 - clip_low, 1 + clip_high) * A)          (PPO / GRPO surrogate)
    l = min(l, -dual_clip * A)  where A < 0, if dual_clip is set           (dual clip, Ye et al.)
    l = l + kl_coef * KL(logp, ref_logp)                                   (if ref_logp is given)

Answer and confidence rows sit in one batch; each row's own `loss_mask` and `advantages` select
what it trains, so nothing here depends on the sample type except the reported metrics.

The per-token loss is reduced to one number by a registered aggregation (`agg`, see
`calibrl.algo.aggregation`) and the KL term is a registered estimator (`kl_estimator`, see
`calibrl.algo.kl`). With gradient accumulation, multiply each micro-batch loss by
`micro_batch_weight(...)` so the accumulated gradient equals the full batch's.
"""

from __future__ import annotations

import torch

from calibrl.algo.aggregation import aggregate_loss, get_aggregation
from calibrl.algo.kl import kl_penalty
from calibrl.algo.rollout_tree import CONFIDENCE, SAMPLE_TYPE_NAMES
from calibrl.errors import UserError


def _check_options(clip_low: float, clip_high: float, dual_clip: float | None, agg: str) -> None:
    if not 0.0 <= clip_low < 1.0 or clip_high < 0.0:
        raise UserError(
            f"clip ranges must satisfy 0 <= clip_low < 1 and clip_high >= 0, "
            f"got {clip_low}, {clip_high}"
        )
    if dual_clip is not None and dual_clip <= 1.0:
        raise UserError(
            f"dual_clip must be > 1 (it bounds the loss at -dual_clip * A), got {dual_clip}"
        )
    get_aggregation(agg)  # an unknown name: a UserError naming the known ones


def row_kl_coef(sample_type: torch.Tensor, kl_coef: float, kl_coef_confidence: float | None
                ) -> torch.Tensor:
    """`[B]` KL coefficient per row: `kl_coef_confidence` on confidence samples
    (`sample_type == CONFIDENCE`, `[B]`) when given, `kl_coef` on the rest."""
    coef = torch.full(sample_type.shape, float(kl_coef))
    if kl_coef_confidence is not None:
        coef[sample_type == CONFIDENCE] = float(kl_coef_confidence)
    return coef


def rows_with_gradient(advantages: torch.Tensor, loss_mask: torch.Tensor,
                       kl_coef: float | torch.Tensor = 0.0) -> torch.Tensor:
    """`[B]` bool: the rows whose loss can move the weights.

    Every surrogate term of a token is its advantage times a function of its ratio, so a row
    whose trained tokens (`loss_mask > 0`, `[B, R]`) all have advantage 0 (`[B, R]`) and whose
    KL coefficient (one number or `[B]`) is 0 adds exactly 0 to every gradient: a GRPO group
    whose answers all scored the same. Skipping them leaves the update unchanged as long as
    the aggregation's micro-batch share is taken against the full batch (`micro_batch_weight`).
    """
    pushes = ((advantages != 0) & (loss_mask > 0)).any(dim=-1)
    coef = torch.as_tensor(kl_coef, device=advantages.device)
    return pushes | (coef > 0).expand_as(pushes)


def policy_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, loss_mask: torch.Tensor,
    *, clip_low: float = 0.2, clip_high: float = 0.2, dual_clip: float | None = None,
    agg: str = "token_mean", max_len: int | None = None,
    ref_logp: torch.Tensor | None = None, kl_coef: float | torch.Tensor = 0.0,
    kl_estimator: str = "k3",
    eta: float = 1e-8, log_ratio_clip: float = 20.0, sample_type: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The clipped surrogate loss and its metrics.

    Args:
        logp: `[B, R]` log-probs of the response tokens under the current policy (with grad).
        old_logp: `[B, R]` log-probs under the sampling policy.
        advantages: `[B, R]` per-token advantages (zero outside the mask).
        loss_mask: `[B, R]` 0/1; only these tokens train. Values outside it may be anything,
            even NaN: they are selected away, never multiplied by 0.
        clip_low, clip_high: the ratio is clipped to `[1 - clip_low, 1 + clip_high]`.
        dual_clip: if set (> 1), caps the loss of negative-advantage tokens at `-dual_clip * A`.
        agg, max_len, eta: aggregation (`calibrl.algo.aggregation`); `eta` (default 1e-8) only guards an empty
            mask in the token-mean denominator `sum(M) + eta`, so it is negligible otherwise.
        ref_logp, kl_coef, kl_estimator: optional KL penalty to a reference policy, added per
            token before aggregation when `ref_logp` is given and `kl_coef` is not all 0;
            `kl_coef` is one number or one per row (`[B]`, e.g. by sample type).
        log_ratio_clip: `logp - old_logp` is clamped to `±log_ratio_clip` before `exp`, so a
            stale token cannot produce inf (the KL estimators clamp as `kl_penalty` says).
        sample_type: optional `[B]` (0 answer, 1 confidence); adds per-type metrics.
    Returns:
        `(loss, metrics)`: a scalar tensor, and floats: `pg_loss`, `clipfrac_low` (share of masked
        tokens with A < 0 and r < 1 - clip_low), `clipfrac_high` (A > 0 and r > 1 + clip_high),
        `dual_clipfrac` (if dual clip), `approx_kl` (mean of `(r - 1) - log r`, KL(old||new)),
        `ratio_mean`, `kl` (if KL); each also as `answer/<name>` and `confidence/<name>` when
        `sample_type` is given and the type has masked tokens.
    """
    tensors = (logp, old_logp, advantages, loss_mask)
    if not (logp.shape == old_logp.shape == advantages.shape == loss_mask.shape) or logp.ndim != 2:
        raise ValueError(
            f"logp, old_logp, advantages, loss_mask must share one [B, R] shape; got "
            f"{[tuple(t.shape) for t in tensors]}"
        )
    _check_options(clip_low, clip_high, dual_clip, agg)
    mask = loss_mask > 0  # [B, R] bool
    zeros = torch.zeros_like(logp)
    # Select before any arithmetic: NaN or -inf outside the mask must not reach exp() or its
    # backward, where 0 * inf would still be NaN.
    lp = torch.where(mask, logp, zeros)
    old_lp = torch.where(mask, old_logp.to(logp.dtype), zeros)
    adv = torch.where(mask, advantages.to(logp.dtype), zeros)  # [B, R]
    terms = _surrogate(lp, old_lp, adv, clip_low, clip_high, dual_clip, log_ratio_clip)
    per_token = terms["pg_loss"]
    coef = torch.as_tensor(kl_coef, dtype=logp.dtype, device=logp.device)
    if ref_logp is not None and bool((coef != 0).any()):
        ref_lp = torch.where(mask, ref_logp.to(logp.dtype), zeros)
        terms["kl"] = kl_penalty(lp, ref_lp, kl_estimator)
        row_coef = coef.reshape(-1, 1) if coef.ndim else coef  # [B, 1] or scalar
        per_token = per_token + row_coef * terms["kl"]  # the KL is 0 off the mask
    loss = aggregate_loss(per_token, loss_mask, agg, max_len=max_len, eta=eta)
    with torch.no_grad():
        metrics = _loss_metrics(terms, adv, clip_low, clip_high, mask, sample_type)
    return loss, metrics


def _surrogate(lp: torch.Tensor, old_lp: torch.Tensor, adv: torch.Tensor, clip_low: float,
               clip_high: float, dual_clip: float | None, log_ratio_clip: float
               ) -> dict[str, torch.Tensor]:
    """Per-token clipped loss `pg_loss [B, R]` = `-min(r A, clip(r) A)` (dual-clipped if set),
    with the ratio `r`, its log and the dual-clip mask, all `[B, R]`, for the metrics."""
    log_ratio = (lp - old_lp).clamp(-log_ratio_clip, log_ratio_clip)
    ratio = torch.exp(log_ratio)  # [B, R]
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    pg = torch.maximum(unclipped, clipped)  # [B, R] = -min(r A, clip(r) A)
    terms = {"pg_loss": pg, "ratio": ratio, "log_ratio": log_ratio}
    if dual_clip is not None:
        dual_bound = (adv < 0) & (pg > -dual_clip * adv)
        terms["pg_loss"] = torch.where(dual_bound, -dual_clip * adv, pg)
        terms["dual_bound"] = dual_bound
    return terms


def _loss_metrics(terms: dict[str, torch.Tensor], adv: torch.Tensor, clip_low: float,
                  clip_high: float, mask: torch.Tensor, sample_type: torch.Tensor | None
                  ) -> dict[str, float]:
    """Masked means of the per-token statistics (see `policy_loss`), overall and per type."""
    ratio, dtype = terms["ratio"], terms["pg_loss"].dtype
    token_stats = {
        "pg_loss": terms["pg_loss"],
        "clipfrac_low": ((adv < 0) & (ratio < 1.0 - clip_low)).to(dtype),
        "clipfrac_high": ((adv > 0) & (ratio > 1.0 + clip_high)).to(dtype),
        "approx_kl": ratio - 1.0 - terms["log_ratio"],
        "ratio_mean": ratio,
    }
    if "dual_bound" in terms:
        token_stats["dual_clipfrac"] = terms["dual_bound"].to(dtype)
    if "kl" in terms:
        token_stats["kl"] = terms["kl"]
    metrics = _masked_means(token_stats, mask, "")
    if sample_type is not None:
        for type_id, type_name in SAMPLE_TYPE_NAMES.items():
            rows = (sample_type == type_id).unsqueeze(-1)  # [B, 1]
            if (mask & rows).any():
                metrics.update(_masked_means(token_stats, mask & rows, f"{type_name}/"))
    return metrics


def _masked_means(
    stats: dict[str, torch.Tensor], mask: torch.Tensor, prefix: str
) -> dict[str, float]:
    count = mask.sum().clamp_min(1)
    return {
        prefix + name: float(
            torch.where(mask, value.detach(), torch.zeros_like(value)).sum() / count
        )
        for name, value in stats.items()
    }
