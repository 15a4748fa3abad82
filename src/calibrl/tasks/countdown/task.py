"""The Countdown task: prompt wording and the `Task` protocol on top of the reward functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from calibrl.tasks.countdown.reward import compute_score, verify_equation_strict

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
        "once. Show your reasoning in <think> </think> tags and give the final equation in "
        "<answer> </answer> tags, for example <answer> (1 + 2) / 3 </answer>."
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


PROMPT_STYLES = {"tinyzero": _tinyzero_messages, "short": _short_messages,
                 "compact": _compact_messages}


@dataclass(frozen=True)
class CountdownTask:
    """Countdown: reach `target` with each of `numbers` once, using + - * / and brackets."""

    name: str = "countdown"
    format_score: float = 0.1
    correct_score: float = 1.0
    failure_score: float = 0.0
    prompt_style: str = "tinyzero"  # a key of PROMPT_STYLES

    def build_messages(self, ground_truth: Mapping[str, Any]) -> list[dict[str, str]]:
        return PROMPT_STYLES[self.prompt_style](ground_truth["numbers"], ground_truth["target"])

    def verify(self, answer_text: str, ground_truth: Mapping[str, Any]) -> bool:
        return verify_equation_strict(answer_text, ground_truth["target"], ground_truth["numbers"])

    def score(self, solution_str: str, ground_truth: Mapping[str, Any]) -> float:
        return compute_score(
            solution_str, ground_truth, format_score=self.format_score, score=self.correct_score
        )

    def difficulty(self, ground_truth: Mapping[str, Any]) -> str:
        """How many numbers the problem has: the main driver of how hard it is."""
        return f"{len(ground_truth['numbers'])} numbers"
