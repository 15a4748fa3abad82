"""The multiple-choice task: a question with lettered choices (GPQA, CommonsenseQA, MMLU),
answered by the correct choice's letter or its full text in `<answer>…</answer>`
(`calibrl.tasks.multiple_choice.choices.parse_choice`).

Scoring follows the verl convention the other tasks use (`Task.score`): 0 when the response has
no answer block, `format_score` (0.1) when it names a wrong choice or none, `correct_score`
(1.0) when it names the right one; `verify` is True exactly when `score` gives `correct_score`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from calibrl.protocol.completions import answer_trace, last_answer
from calibrl.tasks.base import AnswerBlockTask, Conversion, Messages
from calibrl.tasks.multiple_choice.choices import LETTERS, letter, parse_choice
from calibrl.tasks.multiple_choice.prompts import (
    DEFAULT_PROMPT_STYLE,
    INSTRUCTION,
    PROMPT_STYLES,
    make_messages,
)

if TYPE_CHECKING:
    import random

    import pyarrow as pa

    from calibrl.data.example import TaskExample

_CORPUS_PROBLEM = {"question": "Where would you keep a book you are reading?",
                   "choices": ["shelf", "library", "bag", "table", "bed"]}


@dataclass(frozen=True)
class MultipleChoiceTask(AnswerBlockTask):
    """Name the correct choice by its letter or text.

    Ground truth `{"question": str, "choices": [str, ...], "answer": "B", "difficulty": str |
    None}` (see `calibrl.tasks.multiple_choice.data`). `shuffle` and `shuffle_seed` apply when
    converting a file: its choices are shown in an order drawn from the seed and the row.
    """

    name: str = "multiple_choice"
    aliases = ("multiple-choice",)
    format_score: float = 0.1
    correct_score: float = 1.0
    failure_score: float = 0.0
    prompt_style: str = DEFAULT_PROMPT_STYLE  # a key of PROMPT_STYLES
    shuffle: bool = True
    shuffle_seed: int = 0
    # Columns of the data `convert_file` reads under other names, as (target, source) pairs
    # (`calibrl data ... data.columns.TARGET=SOURCE`); a tuple, so the task stays hashable.
    columns: tuple[tuple[str, str], ...] = ()

    prompt_styles = tuple(PROMPT_STYLES)

    def make_prompt(self, ground_truth: Mapping[str, Any], style: str | None = None) -> Messages:
        return make_messages(ground_truth, style or self.prompt_style)

    def check(self, answer_text: str, ground_truth: Mapping[str, Any]) -> bool:
        """The last answer block names the correct choice (by letter, text, or both)."""
        named = parse_choice(last_answer(answer_text), ground_truth["choices"])
        return named is not None and letter(named) == ground_truth["answer"]

    def difficulty(self, ground_truth: Mapping[str, Any]) -> str:
        """The row's own difficulty (GPQA's writer's estimate), else the number of choices
        ("4 choices"), which sets the accuracy of a guess."""
        return ground_truth.get("difficulty") or f"{len(ground_truth['choices'])} choices"

    def check_ground_truth(self, ground_truth: Any) -> dict[str, Any]:
        from calibrl.tasks.multiple_choice.data import choice_ground_truth

        return choice_ground_truth(ground_truth)

    def problem_key(self, ground_truth: Mapping[str, Any]) -> Hashable:
        """The question up to spacing, and its choices in any order."""
        from calibrl.tasks.multiple_choice.data import problem_key

        return problem_key(ground_truth)

    def convert_file(self, path: str | Path, *, n: int | None = None,
                     test_size: int | None = None, test_fraction: float | None = None,
                     solve: bool = True) -> Conversion:
        """CommonsenseQA, GPQA or `{question, choices, answer}` rows (`convert_choice_file`),
        shuffled as `shuffle` and `shuffle_seed` say and read under `columns`; `solve` does
        not apply: the answers are given."""
        from calibrl.tasks.multiple_choice.data import convert_choice_file

        return convert_choice_file(path, n=n, test_size=test_size, test_fraction=test_fraction,
                                   style=self.prompt_style, shuffle=self.shuffle,
                                   seed=self.shuffle_seed, columns=dict(self.columns))

    def arrow_schema(self) -> pa.Schema:
        from calibrl.tasks.multiple_choice.data import arrow_schema

        return arrow_schema()

    def reference_trace(self, example: TaskExample, rng: random.Random | None = None,
                        failed_attempts: int = 0) -> str | None:
        """The correct letter after an empty think block (the data sets give no reasoning)."""
        return answer_trace([], example.ground_truth["answer"])

    def wrong_trace(self, example: TaskExample, rng: random.Random,
                    failed_attempts: int = 0) -> str | None:
        """Another choice's letter, drawn with `rng`: every wrong choice is a plausible one."""
        truth = example.ground_truth
        wrong = [c for c in LETTERS[:len(truth["choices"])] if c != truth["answer"]]
        trace = answer_trace([], rng.choice(wrong))
        return None if self.verify(trace, truth) else trace

    def corpus_texts(self, rng: random.Random) -> list[str]:
        """The instruction, each letter as an answer, and a sample problem in each style."""
        texts = [INSTRUCTION, *LETTERS]
        texts += [m["content"] for style in PROMPT_STYLES
                  for m in make_messages(_CORPUS_PROBLEM, style)]
        return texts
