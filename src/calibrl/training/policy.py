"""Per-token log-probs of a training batch under the policy (loading lives in
`calibrl.models.loading`)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache

from calibrl.algo.batch import TrainBatch, gather_logprobs
from calibrl.rollout.kv_cache import with_cache, zero_hidden_slots


def token_logprobs(model: Any, batch: TrainBatch, temperature: float = 1.0,
                   with_entropy: bool = False, shared_context: bool = False,
                   ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs `[B, R]` of the response tokens under `softmax(logits / temperature)`, and
    optionally the entropy `[B, R]` of that distribution (no grad).

    Responses are right-padded after a left-padded context, so the last R + 1 positions hold
    every logit needed; `logits_to_keep` skips the rest of the vocabulary projection. With
    `shared_context`, rows with the same context encode it once (`response_logits_shared`).
    """
    if shared_context:
        logits = response_logits_shared(model, batch)
    else:
        num_resp = batch.response_ids.shape[1]
        out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                    position_ids=batch.position_ids, use_cache=False,
                    logits_to_keep=num_resp + 1)
        logits = out.logits[:, :-1]
    return gather_logprobs(logits, batch.response_ids, temperature, with_entropy)


def response_logits_shared(model: Any, batch: TrainBatch) -> torch.Tensor:
    """The logits `[B, R, V]` that predict each response token, with every distinct context
    encoded once.

    A GRPO batch repeats each prompt G times (and each two-turn confidence context G_c times),
    so most of a plain forward pass is spent on identical contexts. Here the U distinct
    contexts run once with a KV cache, the cache rows are repeated to the B rows (an index, so
    the gradients of the repeats add up in the shared context), and the responses run on top.
    Equal to the plain forward pass up to float rounding; needs a model whose forward accepts
    a `DynamicCache` (transformers decoders with full attention).
    """
    num_ctx, num_resp = batch.prompt_len, batch.response_ids.shape[1]
    ctx_mask = batch.attention_mask[:, :num_ctx]
    # Identical token ids and padding: identical context (positions follow from the mask).
    _, inverse = torch.unique(torch.cat([batch.prompt_ids, ctx_mask], dim=1), dim=0,
                              return_inverse=True)
    rows = torch.arange(len(batch), device=inverse.device)
    first = torch.full((int(inverse.max()) + 1,), len(batch), device=inverse.device)
    first = first.scatter_reduce(0, inverse, rows, reduce="amin")  # one row per context [U]
    cache = DynamicCache()
    ctx_out = model(input_ids=batch.prompt_ids[first], attention_mask=ctx_mask[first],
                    position_ids=batch.position_ids[first, :num_ctx], **with_cache(model, cache),
                    use_cache=True, logits_to_keep=1)
    first_logits = ctx_out.logits[:, -1][inverse]  # predicts each row's first response token
    if num_resp == 1:
        return first_logits[:, None]
    zero_hidden_slots(cache, ctx_mask[first])  # left padding must not turn into NaN
    cache.batch_select_indices(inverse)
    out = model(input_ids=batch.response_ids[:, :-1],
                attention_mask=batch.attention_mask[:, :num_ctx + num_resp - 1],
                position_ids=batch.position_ids[:, num_ctx:num_ctx + num_resp - 1],
                **with_cache(model, cache), use_cache=True)
    return torch.cat([first_logits[:, None], out.logits], dim=1)
