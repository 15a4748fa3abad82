"""Group-normalised advantages: answers per prompt, confidences per answer (never mixed by
default).

Every normalisation is `(r - mean) / (std + eps)` over a group, with the population std (1/G),
or `r - mean` when `normalize_std=False`; the result is multiplied by a weight `lam`
(`lambda_ans` for answers, `lambda_conf` for confidences).

The core works on flat rows with integer group ids, so ragged groups (a prompt that lost some
answers, an answer that lost some confidences) need no padding; the dense `[P, G_a]` and
`[P, G_a, G_c]` forms are thin wrappers. A group of one gets advantage 0 (nothing to compare with).
"""

from __future__ import annotations

from typing import Literal

import torch

from calibrl.errors import UserError

ConfidenceLevel = Literal["answer", "answer_then_prompt", "prompt"]
CONFIDENCE_LEVELS: tuple[str, ...] = ("answer", "answer_then_prompt", "prompt")
StdScope = Literal["group", "batch"]
STD_SCOPES: tuple[str, ...] = ("group", "batch")


def group_normalize(
    rewards: torch.Tensor,
    group: torch.Tensor,
    *,
    normalize_std: bool = True,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Normalise each reward within its group.

    Args:
        rewards: `[N]` finite rewards.
        group: `[N]` integer group ids (any values; rows with equal ids form a group).
    Returns:
        `[N]` float32: `(r - mean_g) / (std_g + eps)`, or `r - mean_g` without `normalize_std`.
    """
    if rewards.ndim != 1 or group.shape != rewards.shape:
        raise ValueError(
            f"rewards {tuple(rewards.shape)} and group {tuple(group.shape)} must be [N]"
        )
    if rewards.numel() == 0:
        return torch.zeros(0, dtype=torch.float32, device=rewards.device)
    r = rewards.to(torch.float64)  # float64: a std of nearly equal rewards stays exact
    if not torch.isfinite(r).all():
        raise ValueError("rewards must be finite")
    _, inverse, counts = torch.unique(group, return_inverse=True, return_counts=True)
    counts = counts.to(torch.float64)
    mean = torch.zeros_like(counts).index_add_(0, inverse, r) / counts  # [G]
    centered = r - mean[inverse]  # [N]
    if normalize_std:
        var = torch.zeros_like(counts).index_add_(0, inverse, centered.square()) / counts  # [G]
        centered = centered / (var.sqrt()[inverse] + eps)
    return centered.to(torch.float32)


def answer_advantages_by_group(
    rewards: torch.Tensor,
    prompt_group: torch.Tensor,
    *,
    normalize_std: bool = True,
    eps: float = 1e-6,
    lam: float = 1.0,
) -> torch.Tensor:
    """Answer advantages `[N]` from rewards `[N]`, normalised over each prompt's answers."""
    return lam * group_normalize(rewards, prompt_group, normalize_std=normalize_std, eps=eps)


def answer_advantages(
    acc: torch.Tensor, *, normalize_std: bool = True, eps: float = 1e-6, lam: float = 1.0
) -> torch.Tensor:
    """Answer advantages `[P, G_a]` from accuracy rewards `[P, G_a]` (one group per prompt)."""
    if acc.ndim != 2:
        raise ValueError(f"acc must be [P, G_a], got {tuple(acc.shape)}")
    num_prompts, g_a = acc.shape
    prompt_group = torch.arange(num_prompts, device=acc.device).repeat_interleave(g_a)
    flat = answer_advantages_by_group(
        acc.reshape(-1), prompt_group, normalize_std=normalize_std, eps=eps, lam=lam
    )
    return flat.reshape(num_prompts, g_a)


def _check_level(level: str) -> None:
    if level not in CONFIDENCE_LEVELS:
        raise UserError(f"unknown confidence level {level!r}; expected one of {CONFIDENCE_LEVELS}")


def _refuse_single_confidence(level: str) -> None:
    raise UserError(
        f"num_generations_confidence = 1 leaves nothing to normalise per answer (level {level!r} "
        "gives every confidence advantage 0); sample 2 or more confidences per answer, or set "
        "the confidence level to 'prompt'"
    )


def confidence_advantages_by_group(
    rewards: torch.Tensor,
    prompt_group: torch.Tensor,
    answer_group: torch.Tensor,
    *,
    level: ConfidenceLevel = "answer",
    normalize_std: bool = True,
    std_scope: StdScope = "group",
    eps: float = 1e-6,
    lam: float = 1.0,
) -> torch.Tensor:
    """Confidence advantages `[N]` from Brier rewards `[N]`.

    Args:
        rewards: `[N]` confidence rewards.
        prompt_group: `[N]` id of each row's prompt.
        answer_group: `[N]` id of each row's answer; unique across the whole batch, not per prompt.
        level: "answer" (the default) normalises over each answer's siblings, so a confidence
            is compared only with other confidences about the same answer;
            "answer_then_prompt" z-scores those values again over all confidences of the prompt
            (same std/eps rule); "prompt" normalises over all confidences of the prompt at once,
            mixing different answers (kept for ablations).
        std_scope: with `normalize_std`, "group" divides by each group's std (the formula
            above); "batch" only centres within the groups and then divides by one std over the
            whole batch. Why it matters: with G_c = 2 a group std turns every
            advantage into +-1, the sign of the Brier difference, so a wrong answer pushes its
            confidence down exactly as hard as a right one pushes up, and the confidence drifts
            to the majority outcome (e.g. its lowest value when most answers are wrong) instead of
            to the accuracy; one batch-wide scale keeps the Brier differences' sizes, so the
            expected update follows the Brier reward's gradient.
    Raises:
        UserError: unknown level, or a per-answer level ("answer", "answer_then_prompt") where
            every answer has one confidence, so every advantage would be 0 (allowed when
            `lam == 0`: the confidence turn is then switched off anyway).
    """
    _check_level(level)
    if std_scope not in STD_SCOPES:
        raise UserError(f"unknown std scope {std_scope!r}; expected one of {STD_SCOPES}")
    if level != "prompt" and lam != 0.0 and rewards.numel() > 0:
        if torch.unique(answer_group).numel() == answer_group.numel():
            _refuse_single_confidence(level)
    group_std = normalize_std and std_scope == "group"
    if level == "prompt":
        adv = group_normalize(rewards, prompt_group, normalize_std=group_std, eps=eps)
    else:
        adv = group_normalize(rewards, answer_group, normalize_std=group_std, eps=eps)
        if level == "answer_then_prompt":
            adv = group_normalize(adv, prompt_group, normalize_std=group_std, eps=eps)
    if normalize_std and std_scope == "batch":
        # Already centred per group, so one batch-wide group only rescales: by the batch's std.
        adv = group_normalize(adv, torch.zeros_like(answer_group), eps=eps)
    return lam * adv


def confidence_advantages(
    rewards: torch.Tensor,
    *,
    level: ConfidenceLevel = "answer",
    normalize_std: bool = True,
    std_scope: StdScope = "group",
    eps: float = 1e-6,
    lam: float = 1.0,
) -> torch.Tensor:
    """Confidence advantages `[P, G_a, G_c]` from Brier rewards `[P, G_a, G_c]`."""
    if rewards.ndim != 3:
        raise ValueError(f"rewards must be [P, G_a, G_c], got {tuple(rewards.shape)}")
    _check_level(level)
    num_prompts, g_a, g_c = rewards.shape
    device = rewards.device
    prompt_group = torch.arange(num_prompts, device=device).repeat_interleave(g_a * g_c)
    answer_group = torch.arange(num_prompts * g_a, device=device).repeat_interleave(g_c)
    flat = confidence_advantages_by_group(
        rewards.reshape(-1),
        prompt_group,
        answer_group,
        level=level,
        normalize_std=normalize_std,
        std_scope=std_scope,
        eps=eps,
        lam=lam,
    )
    return flat.reshape(num_prompts, g_a, g_c)
