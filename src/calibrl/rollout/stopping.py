"""When a sample ends: EOS, a stop string, or the token budget.

A stop string ends a sample once the decoded generated text contains it. The sample keeps every
token up to and including the one that completes the string, so a tag is never cut in half and
the tokens stay exactly those the model produced.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from calibrl.rollout.engine import FinishReason


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

    def stop_string_in(self, token_ids: Sequence[int]) -> bool:
        """Whether the decoded text of `token_ids` contains a stop string."""
        if not self.stop:
            return False
        tail = decode(self.tokenizer, token_ids[-self.window:])
        if not any(s in tail for s in self.stop):
            return False
        text = tail if len(token_ids) <= self.window else decode(self.tokenizer, token_ids)
        return any(s in text for s in self.stop)

    def finish(self, token_ids: Sequence[int]) -> FinishReason | None:
        """The finish reason once the last token of `token_ids` was appended, or None."""
        if token_ids[-1] in self.eos or self.stop_string_in(token_ids):
            return "stop"
        if len(token_ids) >= self.max_new_tokens:
            return "length"
        return None
