"""The shared decode loop on a fake model whose logits depend only on a row's last token and
position: what it samples must not depend on when finished rows leave the batch."""

from __future__ import annotations

import pytest
import torch

from calibrl.rollout.decode import decode_rows
from calibrl.rollout.engine import SamplingParams
from calibrl.rollout.stopping import StopChecker

VOCAB = 11


class FakeRows:
    """Logits are a fixed function of (token, position); records the rows it keeps."""

    def __init__(self, rows: int) -> None:
        self.rows, self.sizes = rows, []
        torch.manual_seed(0)
        self.table = torch.randn(VOCAB, 64, VOCAB) * 3

    def forward(self, tokens, pos):
        self.sizes.append(len(tokens))
        return self.table[tokens, pos]

    def keep(self, live):
        assert len(live) == self.rows
        index = live.nonzero()[:, 0].flip(0)  # any order will do: the loop follows it
        self.rows = len(index)
        return index


class Tok:
    def decode(self, ids, skip_special_tokens=True):
        return " ".join(str(i) for i in ids)


def run(drop_share, rows=12):
    params = SamplingParams(n=1, temperature=1.0, max_new_tokens=20, seed=3)
    checker = StopChecker(Tok(), (), {0}, params.max_new_tokens)  # token 0 ends a sample
    state = FakeRows(rows)
    first = state.table[torch.arange(rows) % VOCAB, torch.zeros(rows, dtype=torch.long)]
    out = decode_rows(state, first, torch.ones(rows, dtype=torch.long), torch.arange(rows) % 3,
                      torch.arange(rows), params, 3, checker, drop_share=drop_share)
    return out, state.sizes


@pytest.mark.parametrize("drop_share", [1 / 8, 0.5, 1.0])
def test_samples_do_not_depend_on_when_rows_leave(drop_share):
    eager, eager_sizes = run(0.0)
    lazy, lazy_sizes = run(drop_share)
    assert [(g.token_ids, g.logprobs, g.finish_reason, g.text) for g in lazy] == [
        (g.token_ids, g.logprobs, g.finish_reason, g.text) for g in eager]
    assert {g.finish_reason for g in eager} == {"stop", "length"}  # rows did finish early
    assert eager_sizes == sorted(eager_sizes, reverse=True) and eager_sizes[-1] < 12
    assert sum(lazy_sizes) >= sum(eager_sizes)  # finished rows rode along for a while


def test_every_row_decodes_to_its_text_and_stops_at_eos():
    out, _ = run(0.0)
    for g in out:
        assert g.text == Tok().decode(g.token_ids) and len(g.logprobs) == len(g.token_ids)
        assert (g.token_ids[-1] == 0) == (g.finish_reason == "stop")
        assert 0 not in g.token_ids[:-1]
