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
from calibrl.algo.aggregation import (
    Aggregation,
    aggregate_loss,
    aggregation_names,
    get_aggregation,
    micro_batch_weight,
    register_aggregation,
)
from calibrl.algo.batch import TrainBatch, build_train_batch, response_logprobs, row_advantages
from calibrl.algo.kl import (
    KLEstimator,
    get_kl_estimator,
    kl_estimator_names,
    kl_penalty,
    register_kl_estimator,
)
from calibrl.algo.masks import (
    answer_char_span,
    char_span,
    confidence_char_span,
    rlcr_char_span,
    span_loss_mask,
    token_char_offsets,
)
from calibrl.algo.policy_loss import policy_loss
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
    "ANSWER",
    "CONFIDENCE",
    "CONFIDENCE_LEVELS",
    "Aggregation",
    "AnswerNode",
    "KLEstimator",
    "PromptNode",
    "RolloutTree",
    "Sample",
    "TrainBatch",
    "aggregate_loss",
    "aggregation_names",
    "answer_advantages",
    "answer_advantages_by_group",
    "answer_char_span",
    "build_train_batch",
    "char_span",
    "confidence_advantages",
    "confidence_advantages_by_group",
    "confidence_char_span",
    "confidence_histogram",
    "get_aggregation",
    "get_kl_estimator",
    "group_normalize",
    "histogram_values",
    "iter_rows",
    "kl_estimator_names",
    "kl_penalty",
    "micro_batch_weight",
    "policy_loss",
    "register_aggregation",
    "register_kl_estimator",
    "response_logprobs",
    "rlcr_char_span",
    "rollout_stats",
    "row_advantages",
    "score_tree",
    "span_loss_mask",
    "token_char_offsets",
]
