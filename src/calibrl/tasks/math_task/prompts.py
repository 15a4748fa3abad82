"""The math problem, in two styles of wording (`PROMPT_STYLES`, the default first)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from calibrl.errors import UserError
from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, ANSWER_PAIR, THINK_PAIR

Messages = list[dict[str, str]]

INSTRUCTION = (
    f"Show your reasoning in {THINK_PAIR} tags and give the final answer alone, as a number or "
    f"a LaTeX expression, in {ANSWER_PAIR} tags, for example "
    f"{ANSWER_OPEN}\\frac{{3}}{{4}}{ANSWER_CLOSE}."
)


def instruct_messages(question: str) -> Messages:
    """The problem and how to answer it: for pretrained models, which read instructions."""
    return [{"role": "user", "content": f"{question}\n\n{INSTRUCTION}"}]


def compact_messages(question: str) -> Messages:
    """The problem alone: for a tiny model that learns the format from its warm-up."""
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
