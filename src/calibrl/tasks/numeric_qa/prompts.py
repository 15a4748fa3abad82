"""The numeric QA question, in two styles of wording (`PROMPT_STYLES`, the default first)."""

from __future__ import annotations

from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, ANSWER_PAIR, THINK_PAIR
from calibrl.tasks.question_prompts import (
    DEFAULT_PROMPT_STYLE,
    Messages,
    QuestionPrompts,
)

INSTRUCTION = (
    f"Show your reasoning in {THINK_PAIR} tags and give the final number alone in "
    f"{ANSWER_PAIR} tags, for example {ANSWER_OPEN}42{ANSWER_CLOSE}."
)

PROMPTS = QuestionPrompts(INSTRUCTION, separator=" ")
instruct_messages = PROMPTS.instruct
compact_messages = PROMPTS.compact
PROMPT_STYLES = PROMPTS.styles
make_messages = PROMPTS.make_messages
__all__ = ["DEFAULT_PROMPT_STYLE", "INSTRUCTION", "PROMPT_STYLES", "Messages", "compact_messages",
           "instruct_messages", "make_messages"]
