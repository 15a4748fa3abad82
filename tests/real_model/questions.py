"""A few short-answer questions written as rows, for the tests of this folder."""

from __future__ import annotations

from pathlib import Path

from calibrl.data import TaskExample
from calibrl.tasks.files import write_examples
from calibrl.tasks.short_answer.data import short_answer_example

# World-facts questions (their readout cluster is the country: Japan's two are one). Short ones:
# the prompt is most of the tokens a rollout and an update pay for.
QUESTIONS = [
    ("What is the capital of Peru?", "Lima"),
    ("What is the capital of Japan?", "Tokyo"),
    ("On which continent is Japan?", "Asia"),
    ("What is the capital of Egypt?", "Cairo"),
]


def question_examples(n: int = len(QUESTIONS), data_source: str = "short_answer",
                      split: str = "test") -> list[TaskExample]:
    """The first `n` of `QUESTIONS` as short-answer examples with the instruct prompt (the one
    for pretrained models), under `data_source`."""
    examples = []
    for i, (question, answer) in enumerate(QUESTIONS[:n]):
        example = short_answer_example({"question": question, "answers": [answer],
                                        "difficulty": None}, i, split, "instruct")
        examples.append(TaskExample(data_source, example.messages, example.ground_truth, i,
                                    split, example.extra, example.ability))
    return examples


def write_questions(path: Path, n: int = len(QUESTIONS), data_source: str = "short_answer",
                    split: str = "test") -> Path:
    return write_examples(path, question_examples(n, data_source, split))
