"""The multiple-choice question with its lettered choices, in two styles of wording
(`PROMPT_STYLES`, the default first)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from calibrl.errors import UserError
from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, ANSWER_PAIR, THINK_PAIR
from calibrl.tasks.multiple_choice.choices import letter

Messages = list[dict[str, str]]

INSTRUCTION = (
    f"Show your reasoning in {THINK_PAIR} tags and give the letter of the correct choice alone "
    f"in {ANSWER_PAIR} tags, for example {ANSWER_OPEN}A{ANSWER_CLOSE}."
)


def choice_lines(choices: Sequence[str]) -> str:
    """One line per choice, in the shown order: `A) text`."""
    return "\n".join(f"{letter(i)}) {choice}" for i, choice in enumerate(choices))


def instruct_messages(question: str, choices: Sequence[str]) -> Messages:
    """The question, its choices and how to answer: for pretrained models."""
    return [{"role": "user",
             "content": f"{question}\n\n{choice_lines(choices)}\n\n{INSTRUCTION}"}]


def compact_messages(question: str, choices: Sequence[str]) -> Messages:
    """The question and its choices alone: for a tiny model that learns the format from its
    warm-up."""
    return [{"role": "user", "content": f"{question}\n{choice_lines(choices)}"}]


PROMPT_STYLES: dict[str, Callable[[str, Sequence[str]], Messages]] = {
    "instruct": instruct_messages,
    "compact": compact_messages,
}
DEFAULT_PROMPT_STYLE = "instruct"


def make_messages(ground_truth: Mapping[str, Any], style: str) -> Messages:
    """The chat messages posing `ground_truth`'s question and choices (in their stored, shown
    order) in `style` (a key of PROMPT_STYLES)."""
    if style not in PROMPT_STYLES:
        raise UserError(f"unknown prompt style {style!r}; choose {', '.join(PROMPT_STYLES)}")
    return PROMPT_STYLES[style](ground_truth["question"], ground_truth["choices"])
