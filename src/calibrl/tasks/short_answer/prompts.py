"""The short-answer question, in two styles of wording (`PROMPT_STYLES`, the default first)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from calibrl.errors import UserError
from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, ANSWER_PAIR, THINK_PAIR

Messages = list[dict[str, str]]

INSTRUCTION = (
    f"Show your reasoning in {THINK_PAIR} tags and give the final answer alone, as a short "
    f"phrase, in {ANSWER_PAIR} tags, for example {ANSWER_OPEN}Paris{ANSWER_CLOSE}."
)


def instruct_messages(question: str) -> Messages:
    """The question and how to answer it: for pretrained models, which read instructions."""
    return [{"role": "user", "content": f"{question} {INSTRUCTION}"}]


def compact_messages(question: str) -> Messages:
    """The question alone: for a tiny model that learns the format from its warm-up."""
    return [{"role": "user", "content": question}]


PROMPT_STYLES: dict[str, Callable[[str], Messages]] = {
    "instruct": instruct_messages,
    "compact": compact_messages,
}
DEFAULT_PROMPT_STYLE = "instruct"


def make_messages(ground_truth: Mapping[str, Any], style: str) -> Messages:
    """The chat messages posing `ground_truth["question"]` in `style` (a key of PROMPT_STYLES)."""
    if style not in PROMPT_STYLES:
        raise UserError(f"unknown prompt style {style!r}; choose {', '.join(PROMPT_STYLES)}")
    return PROMPT_STYLES[style](ground_truth["question"])
