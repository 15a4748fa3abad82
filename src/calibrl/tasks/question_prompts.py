"""The two ways a question-answering task words its prompt, defined once.

`instruct`: the question and how to answer it, for pretrained models, which read instructions;
`compact`: the question alone, for a tiny model trained from scratch, which learns the format
from its warm-up and would spend most of its prompt on instructions it cannot read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from calibrl.errors import UserError

Messages = list[dict[str, str]]
DEFAULT_PROMPT_STYLE = "instruct"


@dataclass(frozen=True)
class QuestionPrompts:
    """A task's prompt styles: `instruction` follows the question after `separator`."""

    instruction: str
    separator: str = " "
    styles: dict[str, Callable[[str], Messages]] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "styles", {"instruct": self.instruct,
                                            "compact": self.compact})

    def instruct(self, question: str) -> Messages:
        """The question, then how to answer it."""
        return [{"role": "user", "content": f"{question}{self.separator}{self.instruction}"}]

    def compact(self, question: str) -> Messages:
        """The question alone."""
        return [{"role": "user", "content": question}]

    def make_messages(self, ground_truth: Mapping[str, Any], style: str) -> Messages:
        """The chat messages posing `ground_truth["question"]` in `style` (a key of `styles`)."""
        if style not in self.styles:
            raise UserError(f"unknown prompt style {style!r}; choose {', '.join(self.styles)}")
        return self.styles[style](ground_truth["question"])
