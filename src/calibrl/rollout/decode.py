"""The token-by-token sampling loop both KV-cache samplers run: `HFEngine` and the probe's
`CachedSampler`.

They differ only in how a row's context is stored (a padded cache and attention mask, or a
shared prefix plus the row's own tokens), so that part is a `RowState`: feed one token per row,
keep a subset of rows. The loop owns everything else: the random stream of each row, sampling,
stop checks and when finished rows leave the batch.

Row `r` draws its token at step `t` from `uniforms(seed, streams[r], samples[r], t)`, so a
sample does not depend on which rows share its batch (see `calibrl.rollout.sampling`).
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from calibrl.rollout.engine import Generation, SamplingParams
from calibrl.rollout.sampling import sample_tokens, stream_state, uniform_table
from calibrl.rollout.stopping import StopChecker, decode


class RowState(Protocol):
    """The cached contexts of the rows being decoded."""

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Append `tokens` `[R]` at positions `pos` `[R]`; the next-token logits `[R, V]`."""
        ...

    def keep(self, live: torch.Tensor) -> torch.Tensor:
        """Drop the rows where `live` `[R]` is False; returns `[R']`, the old place of each kept
        row in the new order (which a state may choose, e.g. to move as few rows as it can)."""
        ...


def decode_rows(state: RowState, logits: torch.Tensor, pos: torch.Tensor, streams: torch.Tensor,
                samples: torch.Tensor, params: SamplingParams, seed: int, checker: StopChecker,
                drop_share: float = 0.0) -> list[Generation]:
    """Sample every row until it stops; one `Generation` per row, in row order.

    Args:
        logits: `[R, V]` next-token logits after each row's context.
        pos: `[R]` position id of each row's first generated token.
        streams, samples: `[R]` int64, the random stream of each row (see the module docstring).
        drop_share: finished rows leave the batch (`state.keep`) once they are at least this
            share of it; until then they ride along and their tokens are ignored. 0 drops them
            at once; a larger share copies the cache less often when rows finish one by one.

    A step's work is a few tensor operations whatever the number of rows: tokens and log-probs
    go into `[R, T]` tables and `StopChecker.stopped` checks every row at once.
    """
    rows, budget, device = len(streams), params.max_new_tokens, logits.device
    tokens = torch.zeros((rows, budget), dtype=torch.long, device=device)
    logps = torch.zeros((rows, budget), dtype=torch.float32, device=device)
    ends = torch.zeros(rows, dtype=torch.long, device=device)  # tokens each finished row kept
    reasons: list[Any] = [None] * rows
    batch = torch.arange(rows, device=device)  # the row at each batch position
    live = torch.ones(rows, dtype=torch.bool, device=device)  # per batch position
    u = uniform_table(stream_state(seed, streams, samples), budget)  # [R, T]
    for step in range(budget):
        tok, lp = sample_tokens(logits, params.temperature, params.top_k, params.top_p,
                                u[:, step])
        tokens[batch, step], logps[batch, step] = tok, lp
        stopped = checker.stopped(tokens, batch, live, step, logits.shape[-1])
        done = live if step == budget - 1 else stopped
        finished = done.nonzero()[:, 0]
        if len(finished):
            rows_done = batch[finished]
            ends[rows_done] = step + 1
            for r, hit in zip(rows_done.tolist(), stopped[finished].tolist(), strict=True):
                reasons[r] = "stop" if hit else "length"
        live &= ~done
        alive = int(live.sum())
        if alive == 0:
            break
        if alive < len(batch) and len(batch) - alive >= drop_share * len(batch):
            idx = state.keep(live)
            tok, pos, u, batch, live = tok[idx], pos[idx], u[idx], batch[idx], live[idx]
        logits = state.forward(tok, pos)
        pos = pos + 1
    token_lists, logp_lists, lengths = tokens.tolist(), logps.tolist(), ends.tolist()
    out = []
    for r in range(rows):
        ids = token_lists[r][:lengths[r]]
        out.append(Generation(ids, decode(checker.tokenizer, ids), logp_lists[r][:len(ids)],
                              reasons[r]))
    return out
