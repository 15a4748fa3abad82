"""The loss-aggregation and KL-estimator registries.

Every built-in is checked on random tensors against a slow reference written here, one number
at a time, from verl's definitions (`verl/trainer/ppo/core_algos.py`: `kl_penalty` and
`agg_loss`); then lookups by name, errors that list the names, plug-ins, and agreement with
the names the settings accept.
"""

from __future__ import annotations

import math

import pytest
import torch

import calibrl.algo.aggregation as aggregation_module
import calibrl.algo.kl as kl_module
from calibrl.algo import (
    Aggregation,
    KLEstimator,
    aggregate_loss,
    aggregation_names,
    get_aggregation,
    get_kl_estimator,
    kl_estimator_names,
    kl_penalty,
    micro_batch_weight,
    policy_loss,
    register_aggregation,
    register_kl_estimator,
)
from calibrl.errors import UserError
from calibrl.settings import TrainSettings, load_settings
from calibrl.settings.sections import KL_ESTIMATORS, LOSS_AGGREGATIONS


# ---------------------------------------------------------------- verl's definitions, slowly
def _verl_low_var_kl(logp: float, ref: float) -> float:
    kl = min(max(ref - logp, -20.0), 20.0)  # log(ref / policy), clamped before exp
    return min(max(math.exp(kl) - kl - 1.0, -10.0), 10.0)


# verl's `kl_penalty(logprob, ref_logprob, kl_penalty=name)`, per token.
VERL_KL = {
    "kl": lambda logp, ref: logp - ref,
    "k1": lambda logp, ref: logp - ref,
    "abs": lambda logp, ref: abs(logp - ref),
    "mse": lambda logp, ref: 0.5 * (logp - ref) ** 2,
    "k2": lambda logp, ref: 0.5 * (logp - ref) ** 2,
    "low_var_kl": _verl_low_var_kl,
    "k3": _verl_low_var_kl,
}


def verl_agg_loss(loss: list[list[float]], mask: list[list[float]], mode: str) -> float:
    """verl's `agg_loss(loss_mat, loss_mask, loss_agg_mode)`, one number at a time."""
    rows = range(len(loss))
    width = len(loss[0])
    row_sums = [sum(loss[i][t] * mask[i][t] for t in range(width)) for i in rows]
    row_tokens = [sum(mask[i]) for i in rows]
    if mode == "token-mean":  # verl_F.masked_mean: sum(l * m) / (sum(m) + 1e-8)
        return sum(row_sums) / (sum(row_tokens) + 1e-8)
    if mode == "seq-mean-token-mean":
        return sum(s / n for s, n in zip(row_sums, row_tokens, strict=True)) / len(loss)
    if mode == "seq-mean-token-sum-norm":  # the mask width as the constant normaliser
        return sum(row_sums) / width
    raise AssertionError(mode)


def expected_loss(name: str, loss, mask) -> float:
    """calibrl's aggregation `name` in terms of verl's `agg_loss`.

    Dr. GRPO: verl divides a micro-batch's summed loss by the length only and leaves the mean
    over rows to its gradient-accumulation scale; calibrl's loss is the mean over rows itself,
    `sum / (rows * length)` (the paper's 1/G), so it is verl's divided by the rows."""
    verl_mode = name.replace("_", "-")
    value = verl_agg_loss(loss, mask, verl_mode)
    return value / len(loss) if name == "seq_mean_token_sum_norm" else value


def random_loss(seed: int, rows: int, cols: int, *, empty_rows: bool = False):
    """A per-token loss `[rows, cols]` and a 0/1 mask; every row trains something unless
    `empty_rows` (verl's per-row mean would divide 0 by 0)."""
    gen = torch.Generator().manual_seed(seed)
    loss = torch.randn(rows, cols, generator=gen, dtype=torch.float64) * 3
    mask = (torch.rand(rows, cols, generator=gen) < 0.6).double()
    mask[:, 0] = 1.0
    if empty_rows:
        mask[::2] = 0.0
    return loss, mask


# ---------------------------------------------------------------- KL estimators
def test_every_registered_kl_estimator_has_a_verl_reference():
    assert set(kl_estimator_names()) == set(VERL_KL)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", sorted(VERL_KL))
def test_kl_estimators_match_verl(name, seed):
    gen = torch.Generator().manual_seed(seed)
    # Log-probs from near 0 to -30, so log-ratios reach past k3's clamps both ways.
    logp = -torch.rand(6, 9, generator=gen, dtype=torch.float64) * 30
    ref = -torch.rand(6, 9, generator=gen, dtype=torch.float64) * 30
    ref[0] = logp[0] + torch.randn(9, generator=gen, dtype=torch.float64) * 0.01  # near d = 0
    got = kl_penalty(logp, ref, name)
    want = [[VERL_KL[name](a, b) for a, b in zip(row_p, row_r, strict=True)]
            for row_p, row_r in zip(logp.tolist(), ref.tolist(), strict=True)]
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=1e-12,
                               atol=1e-12)


def test_kl_aliases_are_the_same_estimator():
    for alias, name in (("kl", "k1"), ("mse", "k2"), ("low_var_kl", "k3")):
        assert get_kl_estimator(alias) is get_kl_estimator(name)


def test_abs_is_the_size_of_k1():
    gen = torch.Generator().manual_seed(5)
    logp, ref = torch.randn(4, 5, generator=gen), torch.randn(4, 5, generator=gen)
    assert torch.equal(kl_penalty(logp, ref, "abs"), kl_penalty(logp, ref, "k1").abs())
    assert (kl_penalty(logp, ref, "abs") >= 0).all()


def test_abs_trains_through_policy_loss():
    gen = torch.Generator().manual_seed(6)
    old = -torch.rand(3, 4, generator=gen) * 2
    ref = old + torch.randn(3, 4, generator=gen) * 0.3
    mask, adv = torch.ones(3, 4), torch.zeros(3, 4)  # only the KL term moves the loss
    loss, metrics = policy_loss(old, old, adv, mask, ref_logp=ref, kl_coef=0.5,
                                kl_estimator="abs")
    assert float(loss) == pytest.approx(0.5 * float((old - ref).abs().mean()), rel=1e-6)
    assert metrics["kl"] == pytest.approx(float((old - ref).abs().mean()), rel=1e-6)


# ---------------------------------------------------------------- aggregations
def test_every_registered_aggregation_has_a_verl_reference():
    assert set(aggregation_names()) == {"token_mean", "seq_mean_token_mean",
                                        "seq_mean_token_sum_norm"}


@pytest.mark.parametrize("shape", [(1, 1), (4, 7), (9, 3)])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", ["token_mean", "seq_mean_token_mean",
                                  "seq_mean_token_sum_norm"])
def test_aggregations_match_verl(name, seed, shape):
    loss, mask = random_loss(seed, *shape)
    got = float(aggregate_loss(loss, mask, name))
    # Up to calibrl's eta = 1e-8 in the denominators (verl's token-mean has the same one).
    assert got == pytest.approx(expected_loss(name, loss.tolist(), mask.tolist()), rel=1e-7)


def test_dr_grpo_takes_the_configured_length_not_the_padding():
    """With `max_len`, verl's constant normaliser is the configured length, so padding the batch
    wider (with anything, even NaN, off the mask) changes nothing."""
    loss, mask = random_loss(7, 5, 6)
    padded = torch.cat([loss, torch.full((5, 4), float("nan"), dtype=loss.dtype)], dim=1)
    padded_mask = torch.cat([mask, torch.zeros(5, 4, dtype=mask.dtype)], dim=1)
    want = expected_loss("seq_mean_token_sum_norm", padded.nan_to_num().tolist(),
                         padded_mask.tolist()) * 10 / 12  # verl's width is the padded 10
    for values, m in ((loss, mask), (padded, padded_mask)):
        got = float(aggregate_loss(values, m, "seq_mean_token_sum_norm", max_len=12))
        assert got == pytest.approx(want, rel=1e-7)


def test_seq_mean_skips_rows_with_nothing_to_train():
    loss, mask = random_loss(8, 6, 5, empty_rows=True)
    kept = [i for i in range(6) if mask[i].sum() > 0]
    want = verl_agg_loss(loss[kept].tolist(), mask[kept].tolist(), "seq-mean-token-mean")
    assert float(aggregate_loss(loss, mask, "seq_mean_token_mean")) == pytest.approx(
        want, rel=1e-7)


@pytest.mark.parametrize("name", aggregation_names())
def test_micro_batch_shares_add_up_to_the_full_batch(name):
    loss, mask = random_loss(9, 8, 6, empty_rows=True)
    full = float(aggregate_loss(loss, mask, name))
    parts = (slice(0, 3), slice(3, 4), slice(4, 8))
    total = sum(float(aggregate_loss(loss[p], mask[p], name, max_len=6))
                * micro_batch_weight(name, mask[p], mask) for p in parts)
    assert total == pytest.approx(full, rel=1e-7)  # up to eta
    assert sum(micro_batch_weight(name, mask[p], mask) for p in parts) == pytest.approx(1.0)


# ---------------------------------------------------------------- the registries
@pytest.mark.parametrize("lookup,names,what", [
    (get_aggregation, aggregation_names, "loss aggregation"),
    (get_kl_estimator, kl_estimator_names, "KL estimator"),
])
def test_an_unknown_name_is_a_user_error_listing_the_names(lookup, names, what):
    for bad in ("nope", ["unhashable"]):
        with pytest.raises(UserError) as info:
            lookup(bad)
        text = str(info.value)
        assert text.startswith(f"unknown {what} ") and all(n in text for n in names())
    with pytest.raises(UserError, match="unknown loss aggregation 'sum'"):
        aggregate_loss(torch.zeros(1, 2), torch.ones(1, 2), "sum")


@pytest.fixture
def fresh_registries(monkeypatch):
    """Registrations in a test stay in it."""
    monkeypatch.setattr(aggregation_module, "_REGISTRY", dict(aggregation_module._REGISTRY))
    monkeypatch.setattr(kl_module, "_REGISTRY", dict(kl_module._REGISTRY))


def test_a_registered_aggregation_is_used_by_name(fresh_registries):
    def seq_mean_token_sum(masked, mask, width, eta):  # verl's fourth mode
        return masked.sum(-1).mean()

    agg = register_aggregation(Aggregation("seq_mean_token_sum", seq_mean_token_sum,
                                           lambda micro, full: micro.shape[0] / full.shape[0]))
    assert register_aggregation(agg) is agg  # the same one again is fine
    assert aggregation_names()[-1] == "seq_mean_token_sum"
    loss, mask = random_loss(10, 4, 5)
    got = float(aggregate_loss(loss, mask, "seq_mean_token_sum"))
    assert got == pytest.approx(float((loss * mask).sum(-1).mean()), rel=1e-12)
    with pytest.raises(ValueError, match="already registered"):
        register_aggregation(Aggregation("token_mean", seq_mean_token_sum, agg.share))


def test_a_registered_kl_estimator_is_used_by_name(fresh_registries):
    def k2_again(d):
        return 0.5 * d.square()

    register_kl_estimator(KLEstimator("half_square", k2_again, aliases=("hs",)))
    assert kl_estimator_names()[-2:] == ("half_square", "hs")
    logp, ref = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, -1.0]])
    assert torch.equal(kl_penalty(logp, ref, "hs"), kl_penalty(logp, ref, "k2"))
    with pytest.raises(ValueError, match="'kl' is already registered"):
        register_kl_estimator(KLEstimator("fresh", k2_again, aliases=("kl",)))
    assert "fresh" not in kl_estimator_names()  # refused whole, not half registered


# ---------------------------------------------------------------- the settings' names
def test_settings_accept_exactly_the_registered_names():
    """`calibrl.settings` may not import algo, so it lists the names itself; they must be the
    registered ones, in the same order."""
    assert tuple(LOSS_AGGREGATIONS) == aggregation_names()
    assert tuple(KL_ESTIMATORS) == kl_estimator_names()
    for name in aggregation_names():
        assert load_settings(TrainSettings, None, [f"algorithm.loss_agg={name}"]
                             ).algorithm.loss_agg == name
    for name in kl_estimator_names():
        assert load_settings(TrainSettings, None, [f"algorithm.kl_estimator={name}"]
                             ).algorithm.kl_estimator == name


@pytest.mark.parametrize("key,names", [("loss_agg", aggregation_names),
                                       ("kl_estimator", kl_estimator_names)])
def test_settings_refuse_other_names_in_one_line_listing_them(key, names):
    with pytest.raises(UserError) as info:
        load_settings(TrainSettings, None, [f"algorithm.{key}=nope"])
    text = str(info.value)
    assert text.startswith(f"config algorithm.{key}: unknown ") and "\n" not in text
    assert all(name in text for name in names())
