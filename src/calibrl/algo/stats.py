"""Logging statistics of a scored rollout tree: rewards, accuracy, confidence and spread.

`rollout_stats` gives scalars; `histogram_values` the raw values for histograms (TensorBoard's
`add_histogram`), and `confidence_histogram` fixed-bin counts over [0, 1].

Zero spread: a prompt whose answers all got the same reward (or an answer whose confidences all
did) contributes advantage 0 everywhere, i.e. no learning signal; its share is worth watching.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from calibrl.algo.rollout_tree import RolloutTree
from calibrl.rewards.calibration import parse_confidence


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def _zero_spread(values: Sequence[float]) -> bool:
    return max(values) == min(values)


def _turn_stats(prefix: str, samples, groups: list[list[float]]) -> dict[str, float]:
    rewards = [s.reward for s in samples]
    lengths = [len(s.token_ids) for s in samples]
    mean, std = _mean_std(rewards)
    groups = [g for g in groups if g]
    return {
        f"{prefix}/count": float(len(samples)),
        f"{prefix}/reward_mean": mean,
        f"{prefix}/reward_std": std,
        f"{prefix}/length_mean": _mean_std(lengths)[0],
        f"{prefix}/length_max": float(max(lengths, default=0)),
        f"{prefix}/truncated_frac": (
            sum(s.finish_reason == "length" for s in samples) / len(samples) if samples else 0.0
        ),
        f"{prefix}/zero_spread_frac": (
            sum(_zero_spread(g) for g in groups) / len(groups) if groups else 0.0
        ),
    }


def _confidence_texts(tree: RolloutTree) -> list[tuple[str, bool | None]]:
    """(text holding a confidence, accuracy of the answer it is about) for each such sample."""
    spec = tree.spec
    return [(text, a.correct) for p in tree.prompts for a in p.answers
            for text in spec.confidence_texts(a.sample.text, [c.text for c in a.confidences])]


def rollout_stats(tree: RolloutTree) -> dict[str, float]:
    """Scalars for logging.

    `answer/*`: reward mean/std, accuracy, length mean/max (tokens), truncated share, share of
    prompts whose answer rewards have zero spread. `confidence/*` (modes with a confidence turn):
    the same over confidence samples, zero spread counted per answer. `calibration/*` (modes
    that state a confidence):
    share of unparseable confidences, mean parsed confidence, and the Brier score
    `mean (c - acc)^2` over parsed ones.
    """
    answers = [a for p in tree.prompts for a in p.answers]
    stats = _turn_stats(
        "answer",
        [a.sample for a in answers],
        [[a.sample.reward for a in p.answers] for p in tree.prompts],
    )
    labelled = [a.correct for a in answers if a.correct is not None]
    stats["answer/accuracy"] = sum(labelled) / len(labelled) if labelled else 0.0
    if tree.spec.has_confidence_turn:
        stats.update(
            _turn_stats(
                "confidence",
                [c for a in answers for c in a.confidences],
                [[c.reward for c in a.confidences] for a in answers],
            )
        )
    if tree.spec.states_confidence:
        pairs = _confidence_texts(tree)
        parsed = [(parse_confidence(text), correct) for text, correct in pairs]
        values = [c for c, _ in parsed if c is not None]
        scored = [(c - float(k)) ** 2 for c, k in parsed if c is not None and k is not None]
        stats["calibration/parse_fail_frac"] = (
            (len(pairs) - len(values)) / len(pairs) if pairs else 0.0
        )
        stats["calibration/confidence_mean"] = _mean_std(values)[0]
        stats["calibration/brier"] = _mean_std(scored)[0]
    return stats


def histogram_values(tree: RolloutTree) -> dict[str, list[float]]:
    """Raw values for histograms: rewards of both turns and the parsed confidences."""
    answers = [a for p in tree.prompts for a in p.answers]
    out = {"answer/reward": [a.sample.reward for a in answers]}
    if tree.spec.has_confidence_turn:
        out["confidence/reward"] = [c.reward for a in answers for c in a.confidences]
    if tree.spec.states_confidence:
        parsed = (parse_confidence(text) for text, _ in _confidence_texts(tree))
        out["calibration/confidence"] = [c for c in parsed if c is not None]
    return out


def confidence_histogram(values: Sequence[float], bins: int = 10) -> tuple[list[int], list[float]]:
    """Counts of `values` (in [0, 1]) in `bins` equal bins, and the `bins + 1` edges.

    Bins are `[e_i, e_{i+1})`, the last one closed so that 1.0 is counted.
    """
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    edges = [i / bins for i in range(bins + 1)]
    counts = [0] * bins
    for value in values:
        if 0.0 <= value <= 1.0:
            counts[min(bisect.bisect_right(edges, value) - 1, bins - 1)] += 1
    return counts, edges
