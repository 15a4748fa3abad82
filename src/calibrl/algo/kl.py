"""KL estimators: per-token estimates of KL(policy || reference) from the log-probs of the sampled
tokens, each defined once, in one registry, by verl's names (`actor.kl_loss_type`) and clamps.

A `KLEstimator` maps `d = logp - ref_logp` (`[B, R]`) to the per-token estimate (`[B, R]`).
Callers look one up by name (`get_kl_estimator`, or `kl_penalty`) and never compare names; an
alias computes the same estimate as its estimator. Built in (verl's alias in brackets):

    k1 ("kl")          d                      unbiased, can be negative
    abs                |d|
    k2 ("mse")         d^2 / 2                biased, low variance
    k3 ("low_var_kl")  exp(-d) + d - 1        Schulman's unbiased, non-negative estimator;
                       -d clamped to ±20 before exp, the result clamped to ±10 (as verl)

k1, abs and k2 are not clamped (verl does not clamp them either).

`calibrl.settings` may not import this package, so it checks `algorithm.kl_estimator` against
its own list of these names, with their help texts (`KL_ESTIMATORS`);
tests/algo/test_registries.py keeps the two equal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from calibrl.algo.named import get_named, register_named

# k3's clamps, as verl's `low_var_kl`: the log-ratio before exp(), the estimate after it.
K3_LOG_RATIO_CLAMP = 20.0
K3_VALUE_CLAMP = 10.0


@dataclass(frozen=True)
class KLEstimator:
    """One KL estimator.

    Attributes:
        name: a value of `algorithm.kl_estimator`.
        estimate: `d = logp - ref_logp` `[B, R]` -> the per-token estimate `[B, R]`.
        aliases: other names it answers to (verl's).
    """

    name: str
    estimate: Callable[[torch.Tensor], torch.Tensor]
    aliases: tuple[str, ...] = ()


_REGISTRY: dict[str, KLEstimator] = {}


def register_kl_estimator(estimator: KLEstimator) -> KLEstimator:
    """Make `estimator` available under its name and aliases; returns it. A name is
    registered once."""
    return register_named(_REGISTRY, "KL estimator", estimator,
                          (estimator.name, *estimator.aliases))


def kl_estimator_names() -> tuple[str, ...]:
    """Every name an estimator answers to, aliases after their estimator, in registration
    order."""
    return tuple(_REGISTRY)


def get_kl_estimator(name: str) -> KLEstimator:
    """The estimator registered as `name`; a `UserError` naming the valid ones if none."""
    return get_named(_REGISTRY, "KL estimator", name)


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3"
               ) -> torch.Tensor:
    """Per-token estimate `[B, R]` of KL(policy || reference) by the estimator named
    `estimator`, from the log-probs `[B, R]` of the sampled tokens under each."""
    return get_kl_estimator(estimator).estimate(logp - ref_logp)


def _k1(d: torch.Tensor) -> torch.Tensor:
    return d


def _k2(d: torch.Tensor) -> torch.Tensor:
    return 0.5 * d.square()


def _k3(d: torch.Tensor) -> torch.Tensor:
    neg = (-d).clamp(-K3_LOG_RATIO_CLAMP, K3_LOG_RATIO_CLAMP)  # log(ref / policy)
    return (torch.exp(neg) - neg - 1.0).clamp(-K3_VALUE_CLAMP, K3_VALUE_CLAMP)


K1 = register_kl_estimator(KLEstimator("k1", _k1, aliases=("kl",)))
ABS = register_kl_estimator(KLEstimator("abs", torch.abs))
K2 = register_kl_estimator(KLEstimator("k2", _k2, aliases=("mse",)))
K3 = register_kl_estimator(KLEstimator("k3", _k3, aliases=("low_var_kl",)))
