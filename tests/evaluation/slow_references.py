"""Slow, obvious references for the ranking metrics (pairs counted one by one)."""

from __future__ import annotations


def pairwise_auroc(scores, correct):
    """P(right answer scores above a wrong one), ties 1/2, by counting every pair; None if
    either side is empty."""
    right = [s for s, y in zip(scores, correct, strict=True) if y]
    wrong = [s for s, y in zip(scores, correct, strict=True) if not y]
    if not right or not wrong:
        return None
    wins = sum(1.0 if r > w else 0.5 if r == w else 0.0 for r in right for w in wrong)
    return wins / (len(right) * len(wrong))


def pairwise_within_group_auroc(scores, correct, groups):
    """Each group's pairwise AUROC, averaged with weights = group sizes over defined ones."""
    total = weight = 0.0
    for label in set(groups):
        rows = [i for i, g in enumerate(groups) if g == label]
        value = pairwise_auroc([scores[i] for i in rows], [correct[i] for i in rows])
        if value is not None:
            total += value * len(rows)
            weight += len(rows)
    return total / weight if weight else None
