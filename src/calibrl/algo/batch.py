"""Flatten a rollout tree into one training batch (verl layout), both sample types together.

Each row is one sample: its context (for a confidence row: prompt + answer + inserted user turn)
left-padded into `prompt_ids [B, P]`, its generated tokens right-padded into `response_ids [B, R]`.
So every response starts at column P, and everything per token (masks, `advantages`) is
`[B, R]`. The context is never trained, which masks the inserted user turn for free.

The batch holds no sampling log-probs: the trainer takes the old log-probs from the policy itself
(`calibrl.training.update`: the current policy for one pass, a frozen copy for more), so they
always match the training forward pass exactly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace

import torch

from calibrl.algo.advantages import (
    ConfidenceLevel,
    StdScope,
    answer_advantages_by_group,
    confidence_advantages_by_group,
)
from calibrl.algo.masks import SpanKind, span_loss_mask
from calibrl.algo.rollout_tree import ANSWER, CONFIDENCE, RolloutTree, Row, iter_rows


@dataclass
class TrainBatch:
    """One batch of rows (B rows, P context columns, R response columns).

    Attributes:
        prompt_ids: `[B, P]` long, left-padded context.
        response_ids: `[B, R]` long, right-padded generated tokens.
        attention_mask: `[B, P+R]` long, 1 on real tokens.
        position_ids: `[B, P+R]` long, 0 at each row's first real token (0 on left padding).
        response_mask: `[B, R]` float32, 1 on real generated tokens.
        loss_mask: `[B, R]` float32, the span mask (a subset of `response_mask`).
        advantages: `[B, R]` float32, each row's scalar advantage times its `loss_mask`.
        rewards: `[B]` float32.
        sample_type: `[B]` long, `ANSWER` (0) or `CONFIDENCE` (1).
        prompt_group: `[B]` long, the row's prompt position in the tree.
        answer_group: `[B]` long, the row's answer position in the tree (a confidence row: its
            parent's).
    """

    prompt_ids: torch.Tensor
    response_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    response_mask: torch.Tensor
    loss_mask: torch.Tensor
    advantages: torch.Tensor
    rewards: torch.Tensor
    sample_type: torch.Tensor
    prompt_group: torch.Tensor
    answer_group: torch.Tensor

    def __len__(self) -> int:
        return self.prompt_ids.shape[0]

    @property
    def prompt_len(self) -> int:
        return self.prompt_ids.shape[1]

    @property
    def input_ids(self) -> torch.Tensor:
        """`[B, P+R]`: context then response."""
        return torch.cat([self.prompt_ids, self.response_ids], dim=1)

    def _map(self, fn) -> TrainBatch:
        return replace(self, **{f.name: fn(getattr(self, f.name)) for f in fields(self)})

    def to(self, device: torch.device | str) -> TrainBatch:
        return self._map(lambda t: t.to(device))

    def select(self, rows: torch.Tensor | slice) -> TrainBatch:
        """The rows picked by an index tensor, boolean mask or slice."""
        return self._map(lambda t: t[rows])

    def split(self, micro_batch_size: int) -> list[TrainBatch]:
        """Consecutive micro-batches of at most `micro_batch_size` rows, each trimmed."""
        if micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
        return [
            self.select(slice(i, i + micro_batch_size)).trim()
            for i in range(0, len(self), micro_batch_size)
        ]

    def trim(self) -> TrainBatch:
        """Drop context columns that are padding in every row (left) and response columns that
        are padding in every row (right). Positions and masks stay aligned."""
        num_ctx = self.prompt_len
        ctx_real = self.attention_mask[:, :num_ctx].any(0)
        resp_real = self.response_mask.any(0)
        ctx_start = int(ctx_real.nonzero()[0]) if ctx_real.any() else num_ctx
        resp_end = int(resp_real.nonzero()[-1]) + 1 if resp_real.any() else 0
        cols = torch.cat(
            [torch.arange(ctx_start, num_ctx), torch.arange(num_ctx, num_ctx + resp_end)]
        )
        cols = cols.to(self.attention_mask.device)
        per_response = {"response_ids", "response_mask", "loss_mask", "advantages"}
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "prompt_ids":
                out[f.name] = value[:, ctx_start:]
            elif f.name in per_response:
                out[f.name] = value[:, :resp_end]
            elif f.name in ("attention_mask", "position_ids"):
                out[f.name] = value[:, cols]
            else:
                out[f.name] = value
        return TrainBatch(**out)


def gather_logprobs(
    pred: torch.Tensor, token_ids: torch.Tensor, temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs `[B, R]` of `token_ids [B, R]` under `softmax(pred / temperature)`, where
    `pred [B, R, V]` holds the logits that predict each token; optionally the entropy `[B, R]` of
    that distribution (no grad)."""
    scaled = pred.float() if temperature == 1 else pred.float() / temperature  # x / 1 == x
    logp_all = torch.log_softmax(scaled, dim=-1)  # [B, R, V]
    logp = logp_all.gather(-1, token_ids.unsqueeze(-1)).squeeze(-1)  # [B, R]
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = -(logp_all.exp() * logp_all).sum(-1)  # [B, R]
    return logp, entropy


def response_logprobs(logits: torch.Tensor, batch: TrainBatch) -> torch.Tensor:
    """Log-probs `[B, R]` of the response tokens from causal-LM logits `[B, P+R, V]`.

    The token at column `P + t` is predicted by the logits at column `P + t - 1`.
    """
    num_ctx = batch.prompt_len
    num_resp = batch.response_ids.shape[1]
    pred = logits[:, num_ctx - 1 : num_ctx + num_resp - 1]  # [B, R, V]
    return gather_logprobs(pred, batch.response_ids)[0]


def _span_kind(tree: RolloutTree, row: Row) -> SpanKind:
    """The mask kind of a row: its mode's turn-1 or turn-2 span (`calibrl.protocol.modes`)."""
    spec = tree.spec
    kind = spec.confidence_span if row.sample_type == CONFIDENCE else spec.answer_span
    return kind  # type: ignore[return-value]  # a registered mode names a valid kind


def row_advantages(
    rows: list[Row],
    *,
    lambda_ans: float = 1.0,
    lambda_conf: float = 1.0,
    confidence_level: ConfidenceLevel = "answer",
    normalize_std: bool = True,
    confidence_std_scope: StdScope = "group",
    eps: float = 1e-6,
) -> torch.Tensor:
    """Scalar advantage `[B]` of each row (as from `iter_rows`), from each sample's `reward`.

    Answer rows: normalised per prompt, times `lambda_ans` (this is also the single-turn RLCR and
    RLVR advantage). Confidence rows: per `confidence_level` and `confidence_std_scope` (see
    `confidence_advantages_by_group`), times `lambda_conf`.
    """
    rewards = torch.tensor([row.sample.reward for row in rows], dtype=torch.float64)
    prompt_group = torch.tensor([row.prompt_group for row in rows], dtype=torch.long)
    answer_group = torch.tensor([row.answer_group for row in rows], dtype=torch.long)
    sample_type = torch.tensor([row.sample_type for row in rows], dtype=torch.long)
    adv = torch.zeros(len(rows), dtype=torch.float32)
    is_answer = sample_type == ANSWER
    adv[is_answer] = answer_advantages_by_group(
        rewards[is_answer],
        prompt_group[is_answer],
        normalize_std=normalize_std,
        eps=eps,
        lam=lambda_ans,
    )
    is_conf = sample_type == CONFIDENCE
    if is_conf.any():
        adv[is_conf] = confidence_advantages_by_group(
            rewards[is_conf],
            prompt_group[is_conf],
            answer_group[is_conf],
            level=confidence_level,
            normalize_std=normalize_std,
            std_scope=confidence_std_scope,
            eps=eps,
            lam=lambda_conf,
        )
    return adv


def _pad(seqs: Iterable[list], width: int, value, *, left: bool, dtype) -> torch.Tensor:
    rows = [
        ([value] * (width - len(s)) + list(s)) if left else (list(s) + [value] * (width - len(s)))
        for s in seqs
    ]
    return torch.tensor(rows, dtype=dtype).reshape(len(rows), width)


def _pad_id(tokenizer, pad_token_id: int | None) -> int:
    """`pad_token_id`, else the tokenizer's pad id, else its EOS id, else 0."""
    if pad_token_id is None:
        pad_token_id = getattr(tokenizer, "pad_token_id", None)
    if pad_token_id is None:
        pad_token_id = getattr(tokenizer, "eos_token_id", None)
    return pad_token_id if isinstance(pad_token_id, int) else 0


def _token_tensors(rows: list[Row], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Left-padded contexts `[B, P]`, right-padded responses `[B, R]`, their masks and the
    position ids `[B, P+R]` (0 at each row's first real token)."""
    contexts = [row.sample.context_ids for row in rows]
    if any(len(c) == 0 for c in contexts):
        raise ValueError(
            "every sample needs a non-empty context (the first token is predicted from it)"
        )
    responses = [row.sample.token_ids for row in rows]
    num_ctx = max(len(c) for c in contexts)
    num_resp = max(len(r) for r in responses)
    ctx_mask = _pad([[1] * len(c) for c in contexts], num_ctx, 0, left=True, dtype=torch.long)
    response_mask = _pad(
        [[1] * len(r) for r in responses], num_resp, 0, left=False, dtype=torch.long
    )
    attention_mask = torch.cat([ctx_mask, response_mask], dim=1)  # [B, P+R]
    return {
        "prompt_ids": _pad(contexts, num_ctx, pad_token_id, left=True, dtype=torch.long),
        "response_ids": _pad(responses, num_resp, pad_token_id, left=False, dtype=torch.long),
        "attention_mask": attention_mask,
        "position_ids": (attention_mask.cumsum(-1) - 1).clamp_min(0),  # [B, P+R]
        "response_mask": response_mask.to(torch.float32),
    }


def _loss_mask(tree: RolloutTree, rows: list[Row], tokenizer, eos_ids: list[int] | None,
               width: int) -> torch.Tensor:
    """The span mask `[B, R]` of each row, by its mode's span kind (`ModeSpec.answer_span`)."""
    masks = [
        span_loss_mask(tokenizer, row.sample.token_ids, _span_kind(tree, row), eos_ids=eos_ids)
        for row in rows
    ]
    return _pad(masks, width, 0, left=False, dtype=torch.float32)


def build_train_batch(
    tree: RolloutTree,
    tokenizer,
    *,
    lambda_ans: float = 1.0,
    lambda_conf: float = 1.0,
    confidence_level: ConfidenceLevel = "answer",
    normalize_std: bool = True,
    confidence_std_scope: StdScope = "group",
    eps: float = 1e-6,
    pad_token_id: int | None = None,
    eos_ids: Iterable[int] | None = None,
) -> TrainBatch:
    """The training batch of a scored tree: rows in `iter_rows` order, masks, advantages.

    Args:
        tree: a tree whose samples carry their `reward` (see `calibrl.algo.scoring.score_tree`).
        tokenizer: decodes generated ids for the span masks; its `pad_token_id` pads.
        lambda_ans, lambda_conf, confidence_level, normalize_std, confidence_std_scope, eps: see
            `row_advantages`.
        pad_token_id: overrides the tokenizer's pad id (falls back to its EOS id, then 0).
        eos_ids: ids that count as end of sequence for the masks (default: the tokenizer's).
    """
    tree.validate()
    rows = list(iter_rows(tree))
    if not rows:
        raise ValueError("the rollout tree has no samples")
    tokens = _token_tensors(rows, _pad_id(tokenizer, pad_token_id))
    eos_ids = None if eos_ids is None else list(eos_ids)
    loss_mask = _loss_mask(tree, rows, tokenizer, eos_ids, tokens["response_ids"].shape[1])
    adv = row_advantages(
        rows,
        lambda_ans=lambda_ans,
        lambda_conf=lambda_conf,
        confidence_level=confidence_level,
        normalize_std=normalize_std,
        confidence_std_scope=confidence_std_scope,
        eps=eps,
    )  # [B]
    return TrainBatch(
        **tokens,
        loss_mask=loss_mask,
        advantages=adv.unsqueeze(-1) * loss_mask,  # [B, R]
        rewards=torch.tensor([row.sample.reward for row in rows], dtype=torch.float32),
        sample_type=torch.tensor([row.sample_type for row in rows], dtype=torch.long),
        prompt_group=torch.tensor([row.prompt_group for row in rows], dtype=torch.long),
        answer_group=torch.tensor([row.answer_group for row in rows], dtype=torch.long),
    )
