"""Span masks: which generated tokens a sample trains.

- answer rows: from `<think>` to the end of `</answer>`;
- confidence rows: from `<analysis>` (or `<confidence>` when there is none) to the end of
  `</confidence>`;
- single-turn RLCR rows: from `<think>` to the end of `</confidence>` (the one completion holds
  think, answer, analysis and confidence, so the answer span and the confidence span joined).

Rules shared by the three, for the cases the spans above leave open:
- A completion without a complete closing block (no `<answer>…</answer>`, no
  `<confidence>…</confidence>`; e.g. truncated) trains entirely, to the end of the sequence:
  its reward is a format failure and every generated token shares that signal.
- The span runs from the first start tag to the end of the *last* closing tag, so repeated blocks
  are all inside it; a missing `<think>` starts it at the first generated token (the chat template
  may have put `<think>` in the prompt). It is never shrunk to the inside of the tags.
- When the span ends at a closing tag and the very next token is an end-of-sequence token, that
  token trains too, so the model learns to stop.
- Only generated tokens are ever searched, so tags in the prompt or in the inserted user turn
  cannot count; those tokens are not in the response at all.

Tags are found in text, then mapped to tokens through character offsets: a token trains if its
characters overlap the span, so tags split across tokens or glued to neighbours (`.<think>`,
`</answer>\\n`) are handled and the boundary tokens are included, not cut.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, NamedTuple

from calibrl.protocol.tags import (
    ANALYSIS_OPEN,
    ANSWER_CLOSE,
    ANSWER_OPEN,
    CONFIDENCE_CLOSE,
    CONFIDENCE_OPEN,
    THINK_OPEN,
)

SpanKind = Literal["answer", "confidence", "rlcr"]
SPAN_KINDS: tuple[str, ...] = ("answer", "confidence", "rlcr")
# A byte-level decoder returns this for a token that ends inside a multi-byte character.
_INCOMPLETE = "\ufffd"


class CharSpan(NamedTuple):
    """Characters `[start, end)` of the trained span; `closed` if it ends at a closing tag."""

    start: int
    end: int
    closed: bool


# ---------------------------------------------------------------------------------------------
# Tags -> character span


def _block_span(text: str, open_tag: str, close_tag: str, start_tags: Sequence[str]) -> CharSpan:
    """Span of a completion whose trained part ends with the `open_tag … close_tag` block.

    Starts at the first of `start_tags` found before `open_tag` (tried in order), else at 0.
    """
    block_open = text.find(open_tag)
    block_close = text.rfind(close_tag)
    if block_open == -1 or block_close < block_open + len(open_tag):
        return CharSpan(0, len(text), False)
    start = 0
    for tag in start_tags:
        pos = text.find(tag, 0, block_open + len(tag))
        if 0 <= pos <= block_open:
            start = pos
            break
    return CharSpan(start, block_close + len(close_tag), True)


def answer_char_span(text: str) -> CharSpan:
    """`<think>` (or the start) … end of the last `</answer>`; all of `text` if no block."""
    return _block_span(text, ANSWER_OPEN, ANSWER_CLOSE, (THINK_OPEN,))


def confidence_char_span(text: str) -> CharSpan:
    """`<analysis>` or else `<confidence>` … end of the last `</confidence>`; all if no block."""
    return _block_span(text, CONFIDENCE_OPEN, CONFIDENCE_CLOSE, (ANALYSIS_OPEN, CONFIDENCE_OPEN))


def rlcr_char_span(text: str) -> CharSpan:
    """`<think>` (or the start) … end of the last `</confidence>`; all if no confidence block."""
    return _block_span(text, CONFIDENCE_OPEN, CONFIDENCE_CLOSE, (THINK_OPEN,))


_CHAR_SPANS: dict[str, Callable[[str], CharSpan]] = {
    "answer": answer_char_span,
    "confidence": confidence_char_span,
    "rlcr": rlcr_char_span,
}


def char_span(text: str, kind: SpanKind) -> CharSpan:
    if kind not in _CHAR_SPANS:
        raise ValueError(f"unknown span kind {kind!r}; expected one of {SPAN_KINDS}")
    return _CHAR_SPANS[kind](text)


# ---------------------------------------------------------------------------------------------
# Tokens -> characters


def _decoders(
    tokenizer: Any,
) -> tuple[Callable[[list[int]], str], Callable[[list[list[int]]], list[str]]]:
    """(decode one sequence, decode many) with special tokens kept and no space clean-up.

    Special tokens are kept because a chat model may have `<think>` as an added token.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # a fast tokenizer: call the Rust decoder directly, batched
        return (
            lambda ids: backend.decode(ids, skip_special_tokens=False),
            lambda seqs: backend.decode_batch(seqs, skip_special_tokens=False),
        )

    def one(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    return one, lambda seqs: [one(s) for s in seqs]


def token_char_offsets(tokenizer: Any, ids: Sequence[int]) -> tuple[str, list[tuple[int, int]]]:
    """Decode generated `ids` and give each token its characters in the decoded text.

    Returns `(text, offsets)` with `offsets[t] = (start, end)` into `text`, `len(offsets) ==
    len(ids)`, spans non-decreasing and together covering `text`.

    Generated ids need not be the canonical tokenisation of their text, so the text is never
    re-tokenised. Fast path: decode every token alone and check that the pieces join to the
    decoded sequence (true for byte-level BPE on whole characters). Otherwise decode incrementally
    with a sliding window (as streaming detokenisers do): a token's characters are what the window
    gains when it is appended; tokens that end inside a multi-byte character emit nothing until
    the character completes, and then the whole group shares its characters.
    """
    ids = [int(i) for i in ids]
    if not ids:
        return "", []
    decode, decode_batch = _decoders(tokenizer)
    pieces = decode_batch([[i] for i in ids])
    text = "".join(pieces)
    if text == decode(ids):
        offsets, pos = [], 0
        for piece in pieces:
            offsets.append((pos, pos + len(piece)))
            pos += len(piece)
        return text, offsets
    return _incremental_offsets(decode, ids)


def _incremental_offsets(
    decode: Callable[[list[int]], str], ids: list[int]
) -> tuple[str, list[tuple[int, int]]]:
    text = ""
    offsets: list[tuple[int, int]] = [(0, 0)] * len(ids)
    prefix, read = 0, 0  # ids[prefix:read] decoded already; ids[read:] not yet emitted

    def emit(upto: int, new_text: str, prefix_text: str) -> None:
        nonlocal text, prefix, read
        start = len(text)
        text += new_text[len(prefix_text) :]
        for t in range(read, upto):
            offsets[t] = (start, len(text))
        prefix, read = read, upto

    for i in range(len(ids)):
        prefix_text = decode(ids[prefix:read])
        new_text = decode(ids[prefix : i + 1])
        if len(new_text) > len(prefix_text) and not new_text.endswith(_INCOMPLETE):
            emit(i + 1, new_text, prefix_text)
    if read < len(ids):  # ends inside a character (or in tokens that decode to nothing)
        emit(len(ids), decode(ids[prefix:]), decode(ids[prefix:read]))
    return text, offsets


# ---------------------------------------------------------------------------------------------
# Character span -> token mask


def char_span_token_mask(
    offsets: Sequence[tuple[int, int]], span: CharSpan, text_len: int
) -> list[int]:
    """1 for tokens whose characters overlap `[span.start, span.end)`, else 0. `[T]`.

    A token with no characters trains if it sits inside the span, or at the end of a span that
    runs to the end of the text.
    """
    mask = []
    for start, end in offsets:
        if end > start:
            inside = start < span.end and end > span.start
        else:
            inside = span.start <= start and (start < span.end or span.end == text_len)
        mask.append(int(inside))
    return mask


def eos_token_ids(tokenizer: Any) -> set[int]:
    """The tokenizer's end-of-sequence id(s); empty if it has none."""
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is None:
        return set()
    return {int(e) for e in eos} if isinstance(eos, Iterable) else {int(eos)}


def span_loss_mask(
    tokenizer: Any,
    token_ids: Sequence[int],
    kind: SpanKind,
    *,
    eos_ids: Iterable[int] | None = None,
) -> list[int]:
    """The 0/1 loss mask `[T]` of one generated sequence for a sample of `kind`.

    Args:
        tokenizer: a transformers tokenizer (fast or slow) for decoding `token_ids`.
        token_ids: the generated ids only (no prompt), padding removed.
        kind: "answer", "confidence" or "rlcr" (see the module docstring).
        eos_ids: ids that count as end of sequence; default `eos_token_ids(tokenizer)`.
    """
    text, offsets = token_char_offsets(tokenizer, token_ids)
    span = char_span(text, kind)
    mask = char_span_token_mask(offsets, span, len(text))
    if span.closed:
        stop = set(eos_token_ids(tokenizer) if eos_ids is None else eos_ids)
        last = max((t for t, m in enumerate(mask) if m), default=-1)
        if last >= 0 and last + 1 < len(mask) and int(token_ids[last + 1]) in stop:
            mask[last + 1] = 1
    return mask
