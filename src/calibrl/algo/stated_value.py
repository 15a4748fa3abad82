"""The stated value as a distribution: the tokens that write it, where in a reply it is written,
and the expected value of the model's distribution over it.

A stated confidence is `<confidence>0.d</confidence>`: "0." (`VALUE_PREFIX`) and one digit token
d, one of K = 10 value tokens (`ValueTokens`, the tenths 0.0 ... 0.9). The model's logits at the
position that writes the digit, restricted to those K tokens and renormalised over them, are its
distribution over the values; the confidence warm-up trains it (`algo.confidence_loss`), and the
evaluation reads its expected value beside the one value the model sampled
(`calibrl.evaluation.stated_value`).

`value_context_ids` finds that position in a sampled reply, or the one where the value *would*
be written when the reply never writes `<confidence>0.` (no tag, "1.0", junk after the tag): the
reply up to its first `<confidence>` (or all of it, its analysis closed) then `<confidence>0.`,
so every reply has one.

Shapes: B rows, V vocabulary, K value tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from calibrl.algo.confidence_loss import expected_value
from calibrl.errors import UserError
from calibrl.protocol.tags import ANALYSIS_CLOSE, ANALYSIS_OPEN, CONFIDENCE_CLOSE, CONFIDENCE_OPEN

VALUE_PREFIX = "0."  # the stated value is "0." and one digit: the tenths 0.0 ... 0.9
# Between a closed analysis and the value's tag, as the warm-up's trained reply writes it
# (`calibrl.training.calibrate_data.confidence_row`).
TAG_SEPARATOR = "\n"


@dataclass(frozen=True)
class ValueTokens:
    """The K token ids that write the stated value after `VALUE_PREFIX`, their values, and the
    tokens of `<confidence>0.` (`prefix`) that the value token follows."""

    ids: tuple[int, ...]
    values: tuple[float, ...]
    prefix: tuple[int, ...] = ()

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tensor(self.ids), torch.tensor(self.values)


def value_tokens(tokenizer: Any) -> ValueTokens:
    """The digits' tokens after `<confidence>0.`; `UserError` if the tokenizer does not write
    each tenth as that prefix plus exactly one token of its own."""
    ids = []
    prefix = tokenizer(CONFIDENCE_OPEN + VALUE_PREFIX, add_special_tokens=False)["input_ids"]
    closing = tokenizer(CONFIDENCE_CLOSE, add_special_tokens=False)["input_ids"]
    for digit in range(10):
        text = f"{CONFIDENCE_OPEN}{VALUE_PREFIX}{digit}{CONFIDENCE_CLOSE}"
        full = tokenizer(text, add_special_tokens=False)["input_ids"]
        if (full[:len(prefix)] != prefix
                or full[len(prefix) + 1:] != closing or len(full) != len(prefix) + 1 + len(closing)):
            raise UserError(f"the tokenizer does not write {VALUE_PREFIX}{digit} as "
                            f"'{VALUE_PREFIX}' and one token: the stated value cannot be read "
                            "as a distribution over the tenths")
        ids.append(full[len(prefix)])
    if len(set(ids)) != len(ids):
        raise UserError("two tenths share a token in this tokenizer")
    return ValueTokens(tuple(ids), tuple(d / 10 for d in range(10)), tuple(prefix))


def reply_text(tokenizer: Any, ids: Sequence[int]) -> str:
    """The text of reply tokens as the position search reads it: special tokens (EOS) write
    nothing, and no clean-up, so a longer run of tokens never decodes to shorter text."""
    return tokenizer.decode(list(ids), skip_special_tokens=True,
                            clean_up_tokenization_spaces=False)


def forced_opening(text: str) -> str:
    """What goes between a reply that never opened `<confidence>` and the `<confidence>0.`
    appended to it: `ANALYSIS_CLOSE` when its last `<analysis>` is still open, then
    `TAG_SEPARATOR` unless the reply is empty or already ends with it."""
    close = ANALYSIS_CLOSE if text.rfind(ANALYSIS_OPEN) > text.rfind(ANALYSIS_CLOSE) else ""
    head = text + close
    return close + ("" if not head or head.endswith(TAG_SEPARATOR) else TAG_SEPARATOR)


def tokens_within(tokenizer: Any, ids: Sequence[int], head: str) -> int:
    """The fewest leading `ids` whose text is the longest prefix of `head` that leading ids
    write: tokens wholly inside `head`, without the text-less tokens (EOS) that end them.

    Searched by bisection on the text's length, which grows with the number of tokens
    (`reply_text`), then back over the few tokens that straddle the end of `head`.
    """
    low, high = 0, len(ids)  # the first n whose text is longer than head lies in (low, high]
    if len(reply_text(tokenizer, ids)) <= len(head):
        low = high = len(ids) + 1
    while high - low > 1:
        mid = (low + high) // 2
        if len(reply_text(tokenizer, ids[:mid])) > len(head):
            high = mid
        else:
            low = mid
    n = min(high - 1, len(ids))
    while n > 0 and not head.startswith(reply_text(tokenizer, ids[:n])):
        n -= 1  # a token that runs past the end of head, or a byte not yet a character
    text = reply_text(tokenizer, ids[:n])
    while n > 0 and reply_text(tokenizer, ids[:n - 1]) == text:
        n -= 1
    return n


def value_context_ids(tokenizer: Any, sampled_ids: Sequence[int], prefix: Sequence[int]
                      ) -> list[int]:
    """The reply tokens whose last position's logits give the stated value's distribution:
    [T'] ids ending with `prefix` (the tokens of `<confidence>0.`, `ValueTokens.prefix`).

    - The reply opens `<confidence>`: its sampled tokens before the first one, then `prefix`.
      When it wrote `<confidence>0.` as `prefix` there, that is the sampled sequence itself up
      to the digit it sampled; after "1.0" or junk, where "0." would have put the digit.
    - It never opens it: all its text (the tokens writing none at its end, e.g. EOS, dropped),
      `forced_opening` (its analysis closed), then `prefix`.

    A token that straddles the tag's start (text before it, then "<") is written again as
    text: the part before the tag is tokenized anew. sampled_ids: [T] turn-2 reply tokens.
    """
    text = reply_text(tokenizer, sampled_ids)
    start = text.find(CONFIDENCE_OPEN)
    head = text if start < 0 else text[:start]
    keep = tokens_within(tokenizer, sampled_ids, head)
    rest = head[len(reply_text(tokenizer, sampled_ids[:keep])):]
    if start < 0:
        rest += forced_opening(head)
    written = tokenizer(rest, add_special_tokens=False)["input_ids"] if rest else []
    return [*sampled_ids[:keep], *written, *prefix]


def expected_tenths(logits: torch.Tensor, values: ValueTokens
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """(expected value [B], finite [B] bool) of the distribution over the K value tokens.

    logits: [B, V] at the value position (full vocabulary); the K value tokens' logits are
    renormalised over them alone (`confidence_loss.expected_value`), so mass on other tokens
    does not pull the value down. The value lies in [min(values), max(values)] (clamped
    against rounding). A row with a non-finite value logit reads as the uniform mean with
    `finite` False: the caller drops it; nothing here is NaN.
    """
    ids, vals = (t.to(logits.device) for t in values.tensors())  # [K], [K]
    picked = logits[:, ids].float()  # [B, K]
    finite = torch.isfinite(picked).all(-1)  # [B]
    mean = expected_value(torch.where(finite[:, None], picked, 0.0), vals)  # [B]
    return mean.clamp(min(values.values), max(values.values)), finite
