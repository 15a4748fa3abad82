"""The Countdown question, in three styles of wording (`PROMPT_STYLES`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from calibrl.errors import UserError
from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, ANSWER_PAIR, THINK_PAIR

SYSTEM_PROMPT = (
    "You are a helpful assistant. You first think about the reasoning process and then give "
    "the user the answer."
)


def user_prompt(numbers: Sequence[Any], target: Any) -> str:
    """The turn-1 question, in the TinyZero format (think tags, then one answer tag)."""
    nums = "[" + ", ".join(str(int(n)) for n in numbers) + "]"
    return (
        f"Using the numbers {nums}, create an equation that equals {int(target)}. "
        "You can use basic arithmetic operations (+, -, *, /) and each number can only be used "
        f"once. Show your reasoning in {THINK_PAIR} tags and give the final equation in "
        f"{ANSWER_PAIR} tags, for example {ANSWER_OPEN} (1 + 2) / 3 {ANSWER_CLOSE}."
    )


def short_prompt(numbers: Sequence[Any], target: Any) -> str:
    """A compact question (about a third of the tokens): for small models, where the fixed
    instruction text would otherwise dominate the compute of supervised warm-up."""
    nums = " ".join(str(int(n)) for n in numbers)
    return (f"Numbers: {nums}. Target: {int(target)}. Use + - * / and each number once. "
            "Think in <think> </think>, answer in <answer> </answer>.")


def compact_prompt(numbers: Sequence[Any], target: Any) -> str:
    """The shortest question (about 12 tokens): for a tiny model trained from scratch, which
    reads no instructions and learns the format from its warm-up."""
    return f"Numbers: {' '.join(str(int(n)) for n in numbers)}. Target: {int(target)}."


def _tinyzero_messages(numbers: Sequence[Any], target: Any) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user_prompt(numbers, target)}]


def _short_messages(numbers: Sequence[Any], target: Any) -> list[dict[str, str]]:
    return [{"role": "user", "content": short_prompt(numbers, target)}]


def _compact_messages(numbers: Sequence[Any], target: Any) -> list[dict[str, str]]:
    return [{"role": "user", "content": compact_prompt(numbers, target)}]


DEFAULT_PROMPT_STYLE = "tinyzero"
PROMPT_STYLES = {"tinyzero": _tinyzero_messages, "short": _short_messages,
                 "compact": _compact_messages}


def make_messages(ground_truth: Mapping[str, Any], style: str) -> list[dict[str, str]]:
    """The chat messages posing `ground_truth` in `style` (a key of `PROMPT_STYLES`)."""
    if style not in PROMPT_STYLES:
        raise UserError(f"unknown prompt style {style!r}; choose {', '.join(PROMPT_STYLES)}")
    return PROMPT_STYLES[style](ground_truth["numbers"], ground_truth["target"])
