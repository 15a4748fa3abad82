"""Advantages: the spec's formulas by hand, and fast versions against slow loops (ragged too)."""

import math
import random

import pytest
import torch

from calibrl.algo.advantages import (
    answer_advantages,
    answer_advantages_by_group,
    confidence_advantages,
    confidence_advantages_by_group,
    group_normalize,
)
from calibrl.errors import UserError

EPS = 1e-6


def loop_normalize(values, groups, normalize_std=True, eps=EPS):
    """Slow reference: one group at a time, population std, plain Python floats."""
    out = [0.0] * len(values)
    for g in set(groups):
        idx = [i for i, x in enumerate(groups) if x == g]
        vals = [values[i] for i in idx]
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))
        for i in idx:
            out[i] = (values[i] - mean) / (std + eps) if normalize_std else values[i] - mean
    return out


def loop_confidence(values, prompts, answers, level, normalize_std=True, eps=EPS):
    if level == "prompt":
        return loop_normalize(values, prompts, normalize_std, eps)
    per_answer = loop_normalize(values, answers, normalize_std, eps)
    if level == "answer":
        return per_answer
    return loop_normalize(per_answer, prompts, normalize_std, eps)


# ------------------------------------------------------------------ hand-worked examples


def test_answer_advantages_by_hand():
    acc = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 0.0, 0.0, 0.0]])
    adv = answer_advantages(acc)
    # prompt 0: mean 0.5, std 0.5 -> +-0.5 / 0.5
    assert adv[0].tolist() == pytest.approx([1, -1, -1, 1], abs=1e-5)
    # prompt 1: all right, no spread -> no signal
    assert adv[1].tolist() == [0.0, 0.0, 0.0, 0.0]
    # prompt 2: mean 0.25, std sqrt(3)/4
    s = math.sqrt(3) / 4
    assert adv[2].tolist() == pytest.approx([0.75 / s, -0.25 / s, -0.25 / s, -0.25 / s], abs=1e-5)
    assert answer_advantages(acc, normalize_std=False)[2].tolist() == pytest.approx(
        [0.75, -0.25, -0.25, -0.25]
    )
    assert answer_advantages(acc, lam=0.5)[0].tolist() == pytest.approx(
        [0.5, -0.5, -0.5, 0.5], abs=1e-5
    )
    assert adv.dtype == torch.float32 and adv.shape == acc.shape


def test_confidence_advantages_by_hand():
    # one prompt, two answers; answer 0 (right) got confidences 1.0 and 0.6 -> Brier 1.0, 0.84;
    # answer 1 (wrong) got 0.2 twice -> 0.96, 0.96.
    rewards = torch.tensor([[[1.0, 0.84], [0.96, 0.96]]])
    per_answer = confidence_advantages(rewards, level="answer")
    one = 0.08 / (0.08 + EPS)  # answer 0: mean 0.92, std 0.08
    assert per_answer.flatten().tolist() == pytest.approx([one, -one, 0, 0], abs=1e-6)
    twice = confidence_advantages(rewards, level="answer_then_prompt")
    z = one / (math.sqrt(0.5) * one + EPS)  # values [one, -one, 0, 0]: mean 0, std sqrt(1/2)*one
    assert twice.flatten().tolist() == pytest.approx([z, -z, 0, 0], abs=1e-5)
    mixed = confidence_advantages(rewards, level="prompt")
    vals = [1.0, 0.84, 0.96, 0.96]
    mean = sum(vals) / 4
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / 4)
    assert mixed.flatten().tolist() == pytest.approx(
        [(v - mean) / (std + EPS) for v in vals], abs=1e-4
    )
    # mixing gives answer 1's equal confidences a non-zero advantage: the bias the seed warns of
    assert mixed[0, 1, 0] != 0
    assert confidence_advantages(rewards, lam=2.0)[0, 0].tolist() == pytest.approx(
        [2 * one, -2 * one]
    )


def test_single_confidence_per_answer_is_refused_unless_prompt_level():
    rewards = torch.rand(3, 4, 1)
    for level in ("answer", "answer_then_prompt"):
        with pytest.raises(UserError, match="num_generations_confidence = 1"):
            confidence_advantages(rewards, level=level)
        with pytest.raises(UserError):
            confidence_advantages_by_group(
                rewards.flatten(), torch.zeros(12, dtype=torch.long), torch.arange(12), level=level
            )
    assert confidence_advantages(rewards, level="prompt").shape == (3, 4, 1)
    assert confidence_advantages(rewards, level="answer", lam=0.0).abs().sum() == 0  # turn off


def test_bad_inputs():
    with pytest.raises(UserError, match="unknown confidence level"):
        confidence_advantages(torch.rand(1, 2, 2), level="answers")
    with pytest.raises(ValueError):
        answer_advantages(torch.rand(4))
    with pytest.raises(ValueError, match="finite"):
        group_normalize(torch.tensor([1.0, float("nan")]), torch.tensor([0, 0]))
    assert group_normalize(torch.zeros(0), torch.zeros(0, dtype=torch.long)).shape == (0,)


# ------------------------------------------------------------------ against slow loops


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("normalize_std", [True, False])
def test_dense_versions_match_loops(seed, normalize_std):
    gen = torch.Generator().manual_seed(seed)
    num_prompts, g_a, g_c = 3, 4, 3
    acc = torch.randint(0, 2, (num_prompts, g_a), generator=gen).float()
    got = answer_advantages(acc, normalize_std=normalize_std, lam=0.7)
    want = loop_normalize(
        acc.flatten().tolist(), [j for j in range(num_prompts) for _ in range(g_a)], normalize_std
    )
    assert got.flatten().tolist() == pytest.approx([0.7 * w for w in want], abs=1e-5)

    conf = torch.rand(num_prompts, g_a, g_c, generator=gen)
    conf[0, 0] = 0.5  # an answer whose confidences agree
    prompts = [j for j in range(num_prompts) for _ in range(g_a * g_c)]
    answers = [a for a in range(num_prompts * g_a) for _ in range(g_c)]
    for level in ("answer", "answer_then_prompt", "prompt"):
        got = confidence_advantages(conf, level=level, normalize_std=normalize_std)
        want = loop_confidence(conf.flatten().tolist(), prompts, answers, level, normalize_std)
        assert got.flatten().tolist() == pytest.approx(want, abs=1e-4)


@pytest.mark.parametrize("seed", range(10))
def test_ragged_groups_match_loops(seed):
    """Prompts with different numbers of answers, answers with different numbers of confidences
    (including one), arbitrary ids, rows shuffled."""
    rng = random.Random(seed)
    rows = []  # (prompt id, answer id, answer reward, confidence reward)
    answer_id = 1000
    for prompt_id in rng.sample(range(50), 4):
        for _ in range(rng.randint(1, 5)):
            answer_id += rng.randint(1, 3)
            acc = float(rng.random() < 0.5)
            for _ in range(rng.randint(1, 4)):
                rows.append(
                    (prompt_id, answer_id, acc, rng.choice([0.0, 0.36, 0.64, 1.0, rng.random()]))
                )
    rows.append((999, 5000, 1.0, 0.5))  # at least one answer with two confidences, else the
    rows.append((999, 5000, 1.0, 0.7))  # per-answer levels are (rightly) refused
    rng.shuffle(rows)
    prompts, answers, accs, confs = (list(x) for x in zip(*rows, strict=True))
    p, a = torch.tensor(prompts), torch.tensor(answers)
    for normalize_std in (True, False):
        got = answer_advantages_by_group(
            torch.tensor(accs), p, normalize_std=normalize_std, lam=1.5
        )
        want = loop_normalize(accs, prompts, normalize_std)
        assert got.tolist() == pytest.approx([1.5 * w for w in want], abs=1e-5)
        for level in ("answer", "answer_then_prompt", "prompt"):
            got = confidence_advantages_by_group(
                torch.tensor(confs), p, a, level=level, normalize_std=normalize_std
            )
            want = loop_confidence(confs, prompts, answers, level, normalize_std)
            assert got.tolist() == pytest.approx(want, abs=1e-4)


def test_group_normalize_is_shift_invariant_and_zero_mean():
    gen = torch.Generator().manual_seed(0)
    r = torch.rand(40, generator=gen)
    g = torch.randint(0, 7, (40,), generator=gen)
    a = group_normalize(r, g)
    assert torch.allclose(a, group_normalize(r + 3.0, g), atol=1e-5)
    for gid in g.unique():
        assert abs(float(a[g == gid].sum())) < 1e-4


def _slow_batch_scope(rewards, answers):
    """Reference: centre on each answer's mean in a loop, then divide by one batch-wide RMS."""
    centred = []
    for reward, answer in zip(rewards, answers, strict=True):
        siblings = [r for r, a in zip(rewards, answers, strict=True) if a == answer]
        centred.append(reward - sum(siblings) / len(siblings))
    rms = (sum(c * c for c in centred) / len(centred)) ** 0.5
    return [c / (rms + 1e-6) for c in centred]


def test_batch_std_scope_keeps_the_brier_differences_sizes():
    # Brier rewards of confidences 0.2 and 0.5 on a wrong answer (0), then on a right one (1).
    rewards = torch.tensor([1 - 0.2**2, 1 - 0.5**2, 1 - 0.8**2, 1 - 0.5**2], dtype=torch.float64)
    prompt = torch.tensor([0, 0, 0, 0])
    answer = torch.tensor([0, 0, 1, 1])
    by_group = confidence_advantages_by_group(rewards, prompt, answer)
    assert by_group.tolist() == pytest.approx([1, -1, -1, 1], abs=1e-4)  # signs only
    by_batch = confidence_advantages_by_group(rewards, prompt, answer, std_scope="batch")
    assert by_batch.tolist() == pytest.approx(_slow_batch_scope(rewards.tolist(), [0, 0, 1, 1]))
    assert abs(by_batch[2]) > abs(by_batch[0])  # the right answer's larger Brier gap counts more
    assert by_batch.square().mean().item() == pytest.approx(1.0, abs=1e-4)
    off = confidence_advantages_by_group(rewards, prompt, answer, std_scope="batch",
                                         normalize_std=False)
    assert off.tolist() == pytest.approx([0.105, -0.105, -0.195, 0.195], abs=1e-6)
    with pytest.raises(UserError, match="std scope"):
        confidence_advantages_by_group(rewards, prompt, answer, std_scope="rows")


def test_batch_std_scope_moves_a_constant_confidence_toward_the_accuracy():
    """Expected advantage of saying c+d over c, for answers right with probability p: with the
    batch scope it has the sign of p - c (the Brier gradient); the group scope says "lower"
    whenever most answers are wrong, however close c already is to p."""
    c, d = 0.2, 0.1  # p = 0.3 > c
    right = [1 - (1 - c) ** 2, 1 - (1 - c - d) ** 2]
    wrong = [1 - c**2, 1 - (c + d) ** 2]
    rewards = torch.tensor(right * 3 + wrong * 7, dtype=torch.float64)  # 3 right, 7 wrong
    answer = torch.arange(10).repeat_interleave(2)
    prompt = torch.zeros(20, dtype=torch.long)
    for scope, sign in (("batch", 1.0), ("group", -1.0)):
        adv = confidence_advantages_by_group(rewards, prompt, answer, std_scope=scope)
        push_up = adv[1::2].sum().item()  # the higher confidence's advantages
        assert push_up * sign > 0, (scope, push_up)
