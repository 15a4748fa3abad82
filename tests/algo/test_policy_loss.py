"""Policy loss: hand-worked tokens, a slow per-token loop on random inputs, NaN safety, metrics."""

import math

import pytest
import torch

from calibrl.algo import aggregate_loss, aggregation_names, kl_penalty, micro_batch_weight
from calibrl.algo.policy_loss import policy_loss, row_kl_coef, rows_with_gradient
from calibrl.errors import UserError


def loop_loss(
    logp,
    old,
    adv,
    mask,
    *,
    clip_low=0.2,
    clip_high=0.2,
    dual_clip=None,
    agg="token_mean",
    max_len=None,
    ref=None,
    kl_coef=0.0,
    kl_estimator="k3",
    eta=1e-8,
):
    """Slow reference: Python floats, one token at a time."""
    rows = []
    for i in range(len(logp)):
        row = []
        for t in range(len(logp[i])):
            if not mask[i][t]:
                continue
            r = math.exp(logp[i][t] - old[i][t])
            a = adv[i][t]
            loss = -min(r * a, min(max(r, 1 - clip_low), 1 + clip_high) * a)
            if dual_clip is not None and a < 0:
                loss = min(loss, -dual_clip * a)
            coef = kl_coef[i] if isinstance(kl_coef, (list, tuple)) else kl_coef
            if ref is not None and coef:
                d = logp[i][t] - ref[i][t]
                kl = {"k1": d, "k2": d * d / 2, "k3": math.exp(-d) + d - 1}[kl_estimator]
                loss += coef * kl
            row.append(loss)
        rows.append(row)
    tokens = sum(len(r) for r in rows)
    if agg == "token_mean":
        return sum(sum(r) for r in rows) / (tokens + eta)
    if agg == "seq_mean_token_mean":
        means = [sum(r) / len(r) for r in rows if r]
        return sum(means) / (len(means) + eta)
    width = len(logp[0]) if max_len is None else max_len
    return sum(sum(r) for r in rows) / (len(rows) * width + eta)


def random_inputs(seed, rows=5, cols=7):
    gen = torch.Generator().manual_seed(seed)
    old = -torch.rand(rows, cols, generator=gen) * 3
    logp = old + torch.randn(rows, cols, generator=gen) * 0.4  # ratios well outside the clip range
    adv = torch.randn(rows, 1, generator=gen).expand(rows, cols).clone()
    mask = (torch.rand(rows, cols, generator=gen) < 0.7).float()
    mask[0] = 0  # a row with nothing to train
    ref = old + torch.randn(rows, cols, generator=gen) * 0.3
    return logp, old, adv * mask, mask, ref


def test_hand_worked_tokens():
    # ratios 1.5, 0.5, 1.1, 0.5 with advantages +1, +1, -2, -2; clip 0.2
    ratio = torch.tensor([[1.5, 0.5, 1.1, 0.5]])
    old = torch.full((1, 4), -1.0)
    logp = old + ratio.log()
    adv = torch.tensor([[1.0, 1.0, -2.0, -2.0]])
    mask = torch.ones(1, 4)
    loss, m = policy_loss(logp, old, adv, mask)
    # token losses: -min(1.5, 1.2) = -1.2; -min(0.5, 0.8) = -0.5; -min(-2.2, -2.2) = 2.2;
    # -min(-1.0, -1.6) = 1.6
    assert float(loss) == pytest.approx((-1.2 - 0.5 + 2.2 + 1.6) / 4, rel=1e-6)
    assert m["clipfrac_high"] == pytest.approx(0.25) and m["clipfrac_low"] == pytest.approx(0.25)
    assert m["ratio_mean"] == pytest.approx((1.5 + 0.5 + 1.1 + 0.5) / 4, rel=1e-6)
    # dual clip 3 caps a negative-advantage token with ratio 5 at 3 * 2 = 6 instead of 10
    big = torch.tensor([[math.log(5.0)]])
    loss, m = policy_loss(
        big, torch.zeros(1, 1), torch.tensor([[-2.0]]), torch.ones(1, 1), dual_clip=3.0
    )
    assert float(loss) == pytest.approx(6.0, rel=1e-6) and m["dual_clipfrac"] == 1.0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("agg", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"clip_low": 0.1, "clip_high": 0.28},
        {"dual_clip": 1.5},
        {"kl_coef": 0.1, "kl_estimator": "k1"},
        {"kl_coef": 0.1, "kl_estimator": "k2"},
        {"kl_coef": 0.1, "kl_estimator": "k3", "dual_clip": 2.0},
    ],
)
def test_matches_loop_reference(seed, agg, opts):
    logp, old, adv, mask, ref = random_inputs(seed)
    loss, _ = policy_loss(logp, old, adv, mask, agg=agg, ref_logp=ref, **opts)
    want = loop_loss(
        logp.tolist(), old.tolist(), adv.tolist(), mask.tolist(), agg=agg, ref=ref.tolist(), **opts
    )
    assert float(loss) == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_dr_grpo_uses_the_given_max_len():
    logp, old, adv, mask, _ = random_inputs(3)
    loss, _ = policy_loss(logp, old, adv, mask, agg="seq_mean_token_sum_norm", max_len=12)
    want = loop_loss(
        logp.tolist(),
        old.tolist(),
        adv.tolist(),
        mask.tolist(),
        agg="seq_mean_token_sum_norm",
        max_len=12,
    )
    assert float(loss) == pytest.approx(want, rel=1e-5)
    assert float(loss) == pytest.approx(
        float(policy_loss(logp, old, adv, mask, agg="seq_mean_token_sum_norm")[0]) * 7 / 12,
        rel=1e-5,
    )


def test_garbage_outside_the_mask_never_leaks():
    logp, old, adv, mask, ref = random_inputs(0)
    logp = logp.clone().requires_grad_(True)
    junk = torch.where(mask > 0, torch.zeros_like(old), torch.full_like(old, float("nan")))
    loss, metrics = policy_loss(
        logp + junk * 0 + torch.where(mask > 0, 0.0, float("-inf")),
        old + junk,
        adv + junk,
        mask,
        ref_logp=ref + junk,
        kl_coef=0.1,
        dual_clip=3.0,
    )
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    assert (logp.grad[mask == 0] == 0).all()
    assert all(math.isfinite(v) for v in metrics.values())


def test_empty_mask_gives_zero_loss_not_nan():
    zeros = torch.zeros(2, 3)
    for agg in ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"):
        loss, _ = policy_loss(zeros, zeros, zeros, zeros, agg=agg)
        assert float(loss) == 0.0


def test_huge_log_ratios_stay_finite():
    logp = torch.tensor([[0.0, -200.0]], requires_grad=True)
    old = torch.tensor([[-200.0, 0.0]])
    loss, _ = policy_loss(
        logp, old, torch.tensor([[-1.0, 1.0]]), torch.ones(1, 2), ref_logp=old, kl_coef=1.0
    )
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()


def test_gradient_is_the_policy_gradient_inside_the_clip():
    # within the clip range, d loss / d logp = -A * r / N for each masked token
    old = torch.tensor([[-1.0, -2.0, -0.5]])
    logp = (old + torch.tensor([[0.05, -0.05, 0.0]])).requires_grad_(True)
    adv = torch.tensor([[2.0, -1.0, 0.0]])
    loss, _ = policy_loss(logp, old, adv, torch.tensor([[1.0, 1.0, 0.0]]))
    loss.backward()
    r = (logp - old).exp().detach()[0].tolist()
    assert logp.grad[0].tolist() == pytest.approx([-2.0 * r[0] / 2, 1.0 * r[1] / 2, 0.0])


def test_per_type_metrics():
    logp, old, adv, mask, _ = random_inputs(1)
    sample_type = torch.tensor([0, 1, 0, 1, 1])
    _, m = policy_loss(logp, old, adv, mask, sample_type=sample_type)
    for name in ("clipfrac_low", "clipfrac_high", "approx_kl", "ratio_mean", "pg_loss"):
        assert f"answer/{name}" in m and f"confidence/{name}" in m
    ratio = (logp - old).exp()
    conf_mask = mask.clone()
    conf_mask[sample_type == 0] = 0
    want = float((ratio * conf_mask).sum() / conf_mask.sum())
    assert m["confidence/ratio_mean"] == pytest.approx(want, rel=1e-5)
    d = logp - old
    assert m["approx_kl"] == pytest.approx(
        float(((d.exp() - 1 - d) * mask).sum() / mask.sum()), rel=1e-5
    )
    # a type without masked tokens reports nothing rather than a misleading 0
    _, m = policy_loss(logp, old, adv, mask, sample_type=torch.zeros(5, dtype=torch.long))
    assert not any(k.startswith("confidence/") for k in m)


@pytest.mark.parametrize("agg", aggregation_names())
def test_micro_batch_weights_recover_the_full_batch_loss(agg):
    logp, old, adv, mask, _ = random_inputs(2, rows=7)
    full, _ = policy_loss(logp, old, adv, mask, agg=agg, max_len=7)
    total = 0.0
    for rows in (slice(0, 3), slice(3, 5), slice(5, 7)):
        part, _ = policy_loss(logp[rows], old[rows], adv[rows], mask[rows], agg=agg, max_len=7)
        total += float(part) * micro_batch_weight(agg, mask[rows], mask)
    assert total == pytest.approx(float(full), rel=1e-5)


def test_rows_with_gradient_matches_the_loop():
    logp, old, adv, mask, _ = random_inputs(3, rows=8)
    adv[2:5] = 0.0  # groups that all scored the same
    adv[6, :3] = 0.0
    for kl in (0.0, torch.tensor([0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0])):
        coefs = [float(kl)] * 8 if not torch.is_tensor(kl) else kl.tolist()
        expected = [coefs[i] > 0 or any(adv[i, t] != 0 and mask[i, t] > 0 for t in range(7))
                    for i in range(8)]
        assert rows_with_gradient(adv, mask, kl).tolist() == expected
    assert rows_with_gradient(adv, mask, 0.2).all()


@pytest.mark.parametrize("agg", aggregation_names())
def test_rows_without_gradient_can_be_left_out(agg):
    """The loss of the rows `rows_with_gradient` keeps, weighted by their share of the full
    batch, has the full batch's gradient: the left-out rows' gradient is exactly 0."""
    logp, old, adv, mask, _ = random_inputs(4, rows=9)
    adv[[1, 4, 5, 8]] = 0.0
    logp.requires_grad_(True)
    full, _ = policy_loss(logp, old, adv, mask, agg=agg, max_len=7)
    (full_grad,) = torch.autograd.grad(full, logp)
    keep = rows_with_gradient(adv, mask)
    assert keep.tolist() == [i not in (0, 1, 4, 5, 8) for i in range(9)]  # row 0: empty mask
    part, _ = policy_loss(logp[keep], old[keep], adv[keep], mask[keep], agg=agg, max_len=7)
    part = part * micro_batch_weight(agg, mask[keep], mask)
    (part_grad,) = torch.autograd.grad(part, logp)
    assert torch.equal(full_grad[~keep], torch.zeros_like(full_grad[~keep]))
    torch.testing.assert_close(part_grad, full_grad, rtol=1e-5, atol=1e-7)
    assert float(part.detach()) == pytest.approx(float(full.detach()), rel=1e-5)


def test_kl_estimators_by_hand():
    logp, ref = torch.tensor([[math.log(0.5)]]), torch.tensor([[math.log(0.25)]])
    d = math.log(2.0)  # logp - ref
    by_name = {"k1": d, "kl": d, "abs": d, "k2": d * d / 2, "mse": d * d / 2,
               "k3": 0.5 + d - 1, "low_var_kl": 0.5 + d - 1}
    for name, value in by_name.items():
        assert float(kl_penalty(logp, ref, name)) == pytest.approx(value), name
    assert float(kl_penalty(ref, logp, "k1")) == pytest.approx(-d)
    assert float(kl_penalty(ref, logp, "abs")) == pytest.approx(d)


def test_kl_clamps_follow_verl():
    # d = logp - ref far from 0: only k3 is clamped, its log-ratio to ±20, its value to ±10.
    logp = torch.tensor([[0.0, -30.0, -3.0]])
    ref = torch.tensor([[-30.0, 0.0, 0.0]])
    assert kl_penalty(logp, ref, "k1").tolist() == [[30.0, -30.0, -3.0]]
    assert kl_penalty(logp, ref, "k2").tolist() == [[450.0, 450.0, 4.5]]
    k3 = kl_penalty(logp, ref, "k3")[0].tolist()
    # log(ref/policy) = -30 -> clamp -20: exp(-20) + 20 - 1 ~ 19 -> value clamp 10
    # log(ref/policy) = 30 -> clamp 20: exp(20) - 21 -> 10;  = 3: exp(3) - 4 = 16.1 -> 10
    assert k3 == [10.0, 10.0, 10.0]
    small = kl_penalty(torch.tensor([[-1.0]]), torch.tensor([[-1.2]]), "low_var_kl")
    assert float(small) == pytest.approx(math.exp(-0.2) + 0.2 - 1)  # inside the clamps


def test_kl_coefficient_per_row_matches_the_loop():
    logp, old, adv, mask, ref = random_inputs(11)
    coefs = [0.0, 0.3, 0.0, 0.1, 0.5]
    for agg in ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"):
        loss, _ = policy_loss(logp, old, adv, mask, agg=agg, ref_logp=ref,
                              kl_coef=torch.tensor(coefs))
        expected = loop_loss(logp.tolist(), old.tolist(), adv.tolist(), mask.tolist(), agg=agg,
                             ref=ref.tolist(), kl_coef=coefs)
        assert float(loss) == pytest.approx(expected, rel=1e-5), agg
    # All-zero rows mean no KL at all, the same as kl_coef=0.
    zero, _ = policy_loss(logp, old, adv, mask, ref_logp=ref, kl_coef=torch.zeros(5))
    none, _ = policy_loss(logp, old, adv, mask)
    assert float(zero) == float(none)


def test_row_kl_coef_by_sample_type():
    types = torch.tensor([0, 1, 1, 0])
    assert row_kl_coef(types, 0.1, None).tolist() == pytest.approx([0.1] * 4)
    assert row_kl_coef(types, 0.1, 0.0).tolist() == pytest.approx([0.1, 0.0, 0.0, 0.1])
    assert row_kl_coef(types, 0.0, 0.2).tolist() == pytest.approx([0.0, 0.2, 0.2, 0.0])


def test_bad_options_are_user_errors():
    x = torch.zeros(1, 2)
    for kwargs in (
        {"agg": "sum"},
        {"dual_clip": 1.0},
        {"clip_low": 1.0},
        {"clip_high": -0.1},
        {"kl_estimator": "k4", "ref_logp": x, "kl_coef": 0.1},
    ):
        with pytest.raises(UserError):
            policy_loss(x, x, x, x, **kwargs)
    with pytest.raises(UserError):
        aggregate_loss(x, x, "sum")
    with pytest.raises(ValueError):
        policy_loss(x, x, x, torch.zeros(2, 1))
