"""Loss aggregations: how a per-token loss `[B, R]` under a 0/1 mask `[B, R]` becomes the scalar
that is differentiated, each defined once, in one registry.

An `Aggregation` pairs the reduction with the weight of a micro-batch's loss (its share of the
full batch), so gradient accumulation gives the full batch's loss whatever the aggregation.
Callers look one up by name (`get_aggregation`) and never compare names; adding one is one
`register_aggregation(Aggregation(...))`.

Built in (verl's `loss_agg_mode` names, with underscores), with `l` the per-token loss and `M`
the mask:
- `token_mean` (the default): `sum(l * M) / (sum(M) + eta)`; every token weighs the same,
  whichever row it is in;
- `seq_mean_token_mean`: GRPO; each row's masked mean, then the mean over the rows with a
  non-empty mask;
- `seq_mean_token_sum_norm`: Dr. GRPO; `sum(l * M) / (rows * max_len)`, a constant normaliser
  (`max_len` defaults to the mask width R; pass the configured maximum response length so the
  scale does not depend on how the batch was padded or trimmed).

`calibrl.settings` may not import this package, so it checks `algorithm.loss_agg` against its
own list of these names, with their help texts (`LOSS_AGGREGATIONS`);
tests/algo/test_registries.py keeps the two equal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from calibrl.algo.named import get_named, register_named

# (masked loss [B, R] with 0 off the mask, mask [B, R] in the loss's dtype, width, eta) -> scalar
Reduce = Callable[[torch.Tensor, torch.Tensor, int, float], torch.Tensor]
# (micro-batch mask [b, R], full-batch mask [B, R']) -> the micro-batch's share
Share = Callable[[torch.Tensor, torch.Tensor], float]


@dataclass(frozen=True)
class Aggregation:
    """One loss aggregation.

    Attributes:
        name: the value of `algorithm.loss_agg`.
        reduce: the per-token loss, already 0 off the mask, to a scalar (`Reduce`); `width` is
            the constant length normaliser, `eta` guards an empty mask.
        share: the weight of a micro-batch's loss, chosen so that the weighted sum of the
            micro-batch losses is the full batch's loss (`Share`).
    """

    name: str
    reduce: Reduce
    share: Share


_REGISTRY: dict[str, Aggregation] = {}


def register_aggregation(agg: Aggregation) -> Aggregation:
    """Make `agg` available under `agg.name`; returns it. A name is registered once."""
    return register_named(_REGISTRY, "loss aggregation", agg, (agg.name,))


def aggregation_names() -> tuple[str, ...]:
    """Registered aggregation names, in registration order (the built-in three first)."""
    return tuple(_REGISTRY)


def get_aggregation(name: str) -> Aggregation:
    """The aggregation registered as `name`; a `UserError` naming the valid ones if none."""
    return get_named(_REGISTRY, "loss aggregation", name)


def aggregate_loss(per_token: torch.Tensor, loss_mask: torch.Tensor, agg: str = "token_mean", *,
                   max_len: int | None = None, eta: float = 1e-8) -> torch.Tensor:
    """Reduce a per-token loss `[B, R]` under a 0/1 mask `[B, R]` to a scalar with the
    aggregation named `agg`; `max_len` is the constant normaliser (default R)."""
    reduce = get_aggregation(agg).reduce
    mask = loss_mask.to(per_token.dtype)
    masked = torch.where(mask > 0, per_token, torch.zeros_like(per_token))  # NaN-safe where M=0
    return reduce(masked, mask, per_token.shape[-1] if max_len is None else max_len, eta)


def micro_batch_weight(agg: str, micro_mask: torch.Tensor, full_mask: torch.Tensor) -> float:
    """Weight of a micro-batch's loss (mask `[b, R]`) so that the weighted sum over the
    micro-batches equals the loss of the full batch (mask `[B, R']`), up to `eta`."""
    return get_aggregation(agg).share(micro_mask, full_mask)


def _token_mean(masked: torch.Tensor, mask: torch.Tensor, width: int, eta: float
                ) -> torch.Tensor:
    return masked.sum() / (mask.sum() + eta)


def _token_share(micro_mask: torch.Tensor, full_mask: torch.Tensor) -> float:
    return float(micro_mask.sum()) / max(float(full_mask.sum()), 1.0)


def _seq_mean_token_mean(masked: torch.Tensor, mask: torch.Tensor, width: int, eta: float
                         ) -> torch.Tensor:
    tokens = mask.sum(-1)  # [B]
    rows = tokens > 0  # an empty row has no mean to average
    seq_mean = masked.sum(-1) / tokens.clamp_min(1.0)  # [B]
    return (seq_mean * rows).sum() / (rows.sum() + eta)


def _non_empty_row_share(micro_mask: torch.Tensor, full_mask: torch.Tensor) -> float:
    return float((micro_mask.sum(-1) > 0).sum()) / max(float((full_mask.sum(-1) > 0).sum()), 1.0)


def _seq_mean_token_sum_norm(masked: torch.Tensor, mask: torch.Tensor, width: int, eta: float
                             ) -> torch.Tensor:
    return masked.sum() / (masked.shape[0] * width + eta)


def _row_share(micro_mask: torch.Tensor, full_mask: torch.Tensor) -> float:
    return micro_mask.shape[0] / max(full_mask.shape[0], 1)


TOKEN_MEAN = register_aggregation(Aggregation("token_mean", _token_mean, _token_share))
SEQ_MEAN_TOKEN_MEAN = register_aggregation(Aggregation(
    "seq_mean_token_mean", _seq_mean_token_mean, _non_empty_row_share))
SEQ_MEAN_TOKEN_SUM_NORM = register_aggregation(Aggregation(
    "seq_mean_token_sum_norm", _seq_mean_token_sum_norm, _row_share))
