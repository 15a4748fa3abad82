"""Algorithm core: pure functions on tensors (masks, advantages, losses, rollout batches).

Indices throughout: prompt j, answer k (G_a per prompt), confidence h (G_c per answer).
"""

from calibrl.algo.advantages import (
    CONFIDENCE_LEVELS,
    answer_advantages,
    answer_advantages_by_group,
    confidence_advantages,
    confidence_advantages_by_group,
    group_normalize,
)
from calibrl.algo.batch import TrainBatch, build_train_batch, response_logprobs, row_advantages
from calibrl.algo.masks import (
    answer_char_span,
    char_span,
    confidence_char_span,
    rlcr_char_span,
    span_loss_mask,
    token_char_offsets,
)
from calibrl.algo.policy_loss import (
    AGGREGATIONS,
    KL_ESTIMATORS,
    aggregate_loss,
    kl_penalty,
    micro_batch_weight,
    policy_loss,
)
from calibrl.algo.rollout_tree import (
    ANSWER,
    CONFIDENCE,
    AnswerNode,
    PromptNode,
    RolloutTree,
    Sample,
    iter_rows,
)
from calibrl.algo.scoring import score_tree
from calibrl.algo.stats import confidence_histogram, histogram_values, rollout_stats

__all__ = [
    "AGGREGATIONS",
    "ANSWER",
    "CONFIDENCE",
    "CONFIDENCE_LEVELS",
    "KL_ESTIMATORS",
    "AnswerNode",
    "PromptNode",
    "RolloutTree",
    "Sample",
    "TrainBatch",
    "aggregate_loss",
    "answer_advantages",
    "answer_advantages_by_group",
    "answer_char_span",
    "build_train_batch",
    "char_span",
    "confidence_advantages",
    "confidence_advantages_by_group",
    "confidence_char_span",
    "confidence_histogram",
    "group_normalize",
    "histogram_values",
    "iter_rows",
    "kl_penalty",
    "micro_batch_weight",
    "policy_loss",
    "response_logprobs",
    "rlcr_char_span",
    "rollout_stats",
    "row_advantages",
    "score_tree",
    "span_loss_mask",
    "token_char_offsets",
]
