"""Per-token log-probs of a training batch under the policy (loading lives in
`calibrl.models.loading`)."""

from __future__ import annotations

from typing import Any

import torch

from calibrl.algo.batch import TrainBatch, gather_logprobs


def token_logprobs(model: Any, batch: TrainBatch, temperature: float = 1.0,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs `[B, R]` of the response tokens under `softmax(logits / temperature)`, and
    optionally the entropy `[B, R]` of that distribution (no grad).

    Responses are right-padded after a left-padded context, so the last R + 1 positions hold
    every logit needed; `logits_to_keep` skips the rest of the vocabulary projection.
    """
    num_resp = batch.response_ids.shape[1]
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                position_ids=batch.position_ids, use_cache=False, logits_to_keep=num_resp + 1)
    return gather_logprobs(out.logits[:, :-1], batch.response_ids, temperature, with_entropy)
