"""SFT tensors: chat-template tokenisation with loss only on the last message, batches by tokens.

Labels are the input ids on the trained assistant message (its content and its end-of-turn
token) and -100 everywhere else. The boundary is found by rendering the conversation twice with
the tokenizer's own chat template: without the last message but with the generation prompt
(exactly what the model is given at sampling time), and in full. The first must be a token
prefix of the second; a template for which it is not (one that rewrites earlier turns, say)
raises instead of silently training on the wrong tokens.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from calibrl.errors import UserError

IGNORE = -100


@dataclass(frozen=True)
class TokenizedConversation:
    """`input_ids` and `labels` of one conversation, same length, ending at the trained eos."""

    input_ids: list[int]
    labels: list[int]

    @property
    def num_trained(self) -> int:
        return sum(label != IGNORE for label in self.labels)


def _ids(tokenizer, text: str) -> list[int]:
    # The template has already written every special token; adding more would shift the prefix.
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def tokenize_conversation(tokenizer, messages: Sequence[dict[str, str]],
                          reply_prefix: str = "") -> TokenizedConversation:
    """Token ids of `messages` and labels on the last message's tokens through its eos,
    except those of `reply_prefix`, a leading part of the last message given as context.

    Tokens the template writes after the eos (a newline) are dropped: they are neither trained
    nor needed as context. Raises `UserError` if the last message is not the assistant's, the
    prompt rendering is not a token prefix of the full one, or the eos is missing.
    """
    if not messages or messages[-1]["role"] != "assistant":
        raise UserError("the last message of an SFT conversation must be the assistant's")
    if not messages[-1]["content"].startswith(reply_prefix):
        raise UserError("the reply prefix is not the start of the last message")
    eos = tokenizer.eos_token_id
    if eos is None:
        raise UserError("the tokenizer has no eos token to end the trained message")
    prompt = tokenizer.apply_chat_template(list(messages[:-1]), tokenize=False,
                                           add_generation_prompt=True) + reply_prefix
    full = tokenizer.apply_chat_template(list(messages), tokenize=False)
    prompt_ids, full_ids = _ids(tokenizer, prompt), _ids(tokenizer, full)
    start = len(prompt_ids)
    if full_ids[:start] != prompt_ids:
        raise UserError(
            "the chat template's rendering of the prompt (with generation prompt) is not a token "
            "prefix of the full conversation; cannot tell which tokens are the reply"
        )
    try:
        end = full_ids.index(eos, start) + 1
    except ValueError:
        raise UserError("the chat template does not end the assistant message with the eos "
                        f"token {tokenizer.eos_token!r}") from None
    if end == start + 1:
        raise UserError("the trained assistant message is empty")
    input_ids = full_ids[:end]
    labels = [IGNORE] * start + input_ids[start:]
    return TokenizedConversation(input_ids, labels)


def bucket_batches(lengths: Sequence[int], batch_tokens: int, rng: random.Random,
                   pool_batches: int = 32) -> list[list[int]]:
    """Indices grouped into batches of similar length, each padded size <= `batch_tokens`.

    Indices are shuffled, cut into pools of about `pool_batches` batches' worth of tokens, each
    pool sorted by length and packed greedily: a batch grows while (rows * longest row) fits.
    A row longer than `batch_tokens` gets a batch of its own. Batch order is shuffled. Every
    index appears exactly once.
    """
    if batch_tokens < 1:
        raise UserError(f"batch_tokens must be at least 1, got {batch_tokens}")
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches: list[list[int]] = []
    pool: list[int] = []
    pool_tokens = 0
    for position, i in enumerate(order):
        pool.append(i)
        pool_tokens += lengths[i]
        if pool_tokens >= pool_batches * batch_tokens or position == len(order) - 1:
            batch: list[int] = []
            for j in sorted(pool, key=lambda k: lengths[k]):
                # Sorted ascending, so the newcomer is the longest row of the batch.
                if batch and (len(batch) + 1) * lengths[j] > batch_tokens:
                    batches.append(batch)
                    batch = []
                batch.append(j)
            batches.append(batch)
            pool, pool_tokens = [], 0
    rng.shuffle(batches)
    return batches


def collate(rows: Sequence[TokenizedConversation], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded `input_ids`, `attention_mask`, `labels` of shape [B, T] (T = longest row)."""
    width = max(len(r.input_ids) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for b, row in enumerate(rows):
        n = len(row.input_ids)
        input_ids[b, :n] = torch.tensor(row.input_ids)
        labels[b, :n] = torch.tensor(row.labels)
        attention_mask[b, :n] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def token_mean_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy averaged over all labelled tokens of the batch.

    logits: [B, T, V] (any float dtype; computed in fp32). labels: [B, T], `IGNORE` = no loss.
    Position t predicts labels[t + 1]. Returns a scalar; 0 (with a graph) if nothing is labelled.
    """
    pred = logits[:, :-1, :].float()  # [B, T-1, V]
    target = labels[:, 1:]  # [B, T-1]
    count = (target != IGNORE).sum()
    total = F.cross_entropy(pred.reshape(-1, pred.shape[-1]), target.reshape(-1),
                            ignore_index=IGNORE, reduction="sum")
    return total / count.clamp(min=1)
