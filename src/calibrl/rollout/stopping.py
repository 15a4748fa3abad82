"""When a sample ends: EOS, a stop string, or the token budget.

A stop string ends a sample once the decoded generated text contains it. The sample keeps every
token up to and including the one that completes the string, so a tag is never cut in half and
the tokens stay exactly those the model produced.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from calibrl.rollout.engine import FinishReason

# Per tokenizer: {(stop strings, vocabulary size): `may_complete` table}; decoding a whole
# vocabulary token by token takes a moment, once per process.
_TABLES: weakref.WeakKeyDictionary[Any, dict[tuple, torch.Tensor]] = weakref.WeakKeyDictionary()


def decode(tokenizer: Any, token_ids: Sequence[int]) -> str:
    """The text of generated tokens, special tokens (EOS, chat markers) left out."""
    return tokenizer.decode(list(token_ids), skip_special_tokens=True)


class StopChecker:
    """Decides after each new token whether a sample is finished.

    Decoding the whole sample at every step would cost O(T^2); the checker first decodes a
    window of recent tokens wide enough to hold any stop string (a character takes at most 4
    byte tokens) and confirms a hit on the full text, so its answer is the full-text one.
    """

    def __init__(self, tokenizer: Any, stop: Sequence[str], eos_token_ids: Iterable[int],
                 max_new_tokens: int) -> None:
        self.tokenizer = tokenizer
        self.stop = tuple(stop)
        self.eos = frozenset(int(t) for t in eos_token_ids)
        self.max_new_tokens = max_new_tokens
        self.window = 4 * max((len(s) for s in self.stop), default=0) + 8
        self._eos: torch.Tensor | None = None  # `stopped`'s look-up tables, per vocabulary
        self._candidate: torch.Tensor | None = None

    def stop_string_in(self, token_ids: Sequence[int]) -> bool:
        """Whether the decoded text of `token_ids` contains a stop string."""
        if not self.stop:
            return False
        tail = decode(self.tokenizer, token_ids[-self.window:])
        if not any(s in tail for s in self.stop):
            return False
        text = tail if len(token_ids) <= self.window else decode(self.tokenizer, token_ids)
        return any(s in text for s in self.stop)

    def may_complete(self, vocab: int) -> torch.Tensor:
        """`[vocab]` bool: False for a token that cannot complete a stop string, so a decoding
        loop checks the text only after the others.

        A stop string that newly appears when a token is appended ends inside that token's text,
        so that text holds the string's last character; a token whose own text (decoded alone)
        lacks every stop string's last character cannot complete one. Decoded alone, a token
        may lose a leading space (SentencePiece) or show part of a character as U+FFFD (byte
        tokens): so every token is a candidate when a stop string ends in whitespace, and so are
        tokens with U+FFFD or no text of their own. Ids past the tokenizer's are candidates.
        """
        key = (self.stop, vocab)
        tables = _TABLES.setdefault(self.tokenizer, {})
        if key not in tables:
            table = torch.ones(vocab, dtype=torch.bool)
            lasts = {s[-1] for s in self.stop if s}
            if not self.stop:
                table[:] = False
            elif all(self.stop) and not any(c.isspace() for c in lasts):
                known = min(vocab, len(self.tokenizer)) if hasattr(self.tokenizer, "__len__") \
                    else vocab
                if hasattr(self.tokenizer, "batch_decode"):
                    texts = self.tokenizer.batch_decode([[i] for i in range(known)],
                                                        skip_special_tokens=True)
                else:
                    texts = [decode(self.tokenizer, [i]) for i in range(known)]
                table[:known] = torch.tensor([not t or "\ufffd" in t or any(c in t for c in lasts)
                                              for t in texts], dtype=torch.bool)
            tables[key] = table
        return tables[key]

    def stopped(self, tokens: torch.Tensor, rows: torch.Tensor, live: torch.Tensor, step: int,
                vocab: int) -> torch.Tensor:
        """`finish(...) == "stop"` for many rows at once, after their token at `step`.

        Args:
            tokens: `[R, T]` every row's tokens so far (columns `0..step` filled), ids < `vocab`.
            rows: `[B]` the rows in the batch (their index in `tokens`).
            live: `[B]` bool, the rows still sampling (the others are not checked).
        Returns:
            `[B]` bool, False where not `live`. EOS is a table look-up; a row's text is decoded only after a token that
            may complete a stop string (`may_complete`).
        """
        if self._eos is None or len(self._eos) != vocab or self._eos.device != tokens.device:
            eos = torch.zeros(vocab, dtype=torch.bool)
            eos[[t for t in self.eos if 0 <= t < vocab]] = True
            self._eos = eos.to(tokens.device)
            self._candidate = self.may_complete(vocab).to(tokens.device)
        last = tokens[rows, step]
        out = self._eos[last] & live
        maybe = (self._candidate[last] & ~out & live).nonzero()[:, 0]
        for j, r in zip(maybe.tolist(), rows[maybe].tolist(), strict=True):
            if self.stop_string_in(tokens[r, :step + 1].tolist()):
                out[j] = True
        return out

    def finish(self, token_ids: Sequence[int]) -> FinishReason | None:
        """The finish reason once the last token of `token_ids` was appended, or None (one
        sequence; `stopped` is the same test for a batch)."""
        if token_ids[-1] in self.eos or self.stop_string_in(token_ids):
            return "stop"
        if len(token_ids) >= self.max_new_tokens:
            return "length"
        return None
