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
from calibrl.rollout.sampling import sample_tokens, stream_state, uniforms_at
from calibrl.rollout.stopping import StopChecker, decode


class RowState(Protocol):
    """The cached contexts of the rows being decoded."""

    def forward(self, tokens: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Append `tokens` `[R]` at positions `pos` `[R]`; the next-token logits `[R, V]`."""
        ...

    def select(self, index: torch.Tensor) -> None:
        """Keep rows `index` `[R']` (in that order), dropping the others."""
        ...


def decode_rows(state: RowState, logits: torch.Tensor, pos: torch.Tensor, streams: torch.Tensor,
                samples: torch.Tensor, params: SamplingParams, seed: int, checker: StopChecker,
                drop_share: float = 0.0) -> list[Generation]:
    """Sample every row until it stops; one `Generation` per row, in row order.

    Args:
        logits: `[R, V]` next-token logits after each row's context.
        pos: `[R]` position id of each row's first generated token.
        streams, samples: `[R]` int64, the random stream of each row (see the module docstring).
        drop_share: finished rows leave the batch (`state.select`) once they are at least this
            share of it; until then they ride along and their tokens are ignored. 0 drops them
            at once; a larger share copies the cache less often when rows finish one by one.
    """
    rows = len(streams)
    tokens: list[list[int]] = [[] for _ in range(rows)]
    logps: list[list[float]] = [[] for _ in range(rows)]
    reasons: list[Any] = [None] * rows
    batch = list(range(rows))  # the row at each batch position
    stream = stream_state(seed, streams, samples)  # [R]; the step-free part of `uniforms`
    for step in range(params.max_new_tokens):
        u = uniforms_at(stream, step)
        tok, lp = sample_tokens(logits, params.temperature, params.top_k, params.top_p, u)
        live = []
        for j, (r, t, p) in enumerate(zip(batch, tok.tolist(), lp.tolist(), strict=True)):
            if reasons[r] is None:
                tokens[r].append(t)
                logps[r].append(p)
                reasons[r] = checker.finish(tokens[r])
                if reasons[r] is None:
                    live.append(j)
        if not live:
            break
        finished = len(batch) - len(live)
        if finished and finished >= drop_share * len(batch):
            idx = torch.tensor(live, device=tok.device)
            state.select(idx)
            tok, pos, stream = tok[idx], pos[idx], stream[idx]
            batch = [batch[j] for j in live]
        logits = state.forward(tok, pos)
        pos = pos + 1
    return [Generation(tokens[r], decode(checker.tokenizer, tokens[r]), logps[r], reasons[r])
            for r in range(rows)]
