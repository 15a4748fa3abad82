"""Rewards: batch reward manager, calibration rewards, ecosystem adapters."""

from calibrl.rewards.calibration import (
    accuracy_reward,
    brier_reward,
    correctness_reward,
    parse_confidence,
    rlcr_format_ok,
    rlcr_reward,
)
from calibrl.rewards.manager import BatchRewardManager, RewardOutput

__all__ = [
    "BatchRewardManager",
    "RewardOutput",
    "accuracy_reward",
    "brier_reward",
    "correctness_reward",
    "parse_confidence",
    "rlcr_format_ok",
    "rlcr_reward",
]
