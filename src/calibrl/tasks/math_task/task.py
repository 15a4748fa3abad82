"""The math task: a MATH or GSM8K problem answered by a final expression, right iff math-verify
finds it equal to the reference answer.

The answer is the last `<answer>…</answer>` block, or without one the last `\\boxed{…}` of the
response (`extract_math_answer`). Scoring follows the verl convention of the other tasks: 0 when
the response gives no answer, `format_score` (0.1) when it is wrong, `correct_score` (1.0) when
it is right; `verify` is True exactly when `score` gives `correct_score`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from calibrl.protocol.completions import answer_trace, response_part
from calibrl.tasks.base import AnswerBlockTask, Conversion, Messages
from calibrl.tasks.math_task.answers import (
    MISSING_EXTRA,
    equivalent,
    extract_math_answer,
    load_math_verify,
)
from calibrl.tasks.math_task.prompts import (
    DEFAULT_PROMPT_STYLE,
    INSTRUCTION,
    PROMPT_STYLES,
    make_messages,
)

if TYPE_CHECKING:
    import random

    import pyarrow as pa

    from calibrl.data.example import TaskExample

__all__ = ["MISSING_EXTRA", "MathTask"]
_CORPUS_QUESTIONS = ("What is $\\frac{1}{2} + \\frac{1}{3}$?",
                     "Natalia sold 48 clips in April and half as many in May. How many in all?")


@dataclass(frozen=True)
class MathTask(AnswerBlockTask):
    """Solve a math problem; right iff math-verify accepts the final answer.

    Ground truth `{"question": str, "answer": str, "difficulty": str | None}` (see
    `calibrl.tasks.math_task.data`).
    """

    name: str = "math"
    format_score: float = 0.1
    correct_score: float = 1.0
    failure_score: float = 0.0
    prompt_style: str = DEFAULT_PROMPT_STYLE  # a key of PROMPT_STYLES
    # Columns of the data `convert_file` reads under other names, as (target, source) pairs
    # (`calibrl data ... data.columns.TARGET=SOURCE`); a tuple, so the task stays hashable.
    columns: tuple[tuple[str, str], ...] = ()

    prompt_styles = tuple(PROMPT_STYLES)

    def make_prompt(self, ground_truth: Mapping[str, Any], style: str | None = None) -> Messages:
        return make_messages(ground_truth, style or self.prompt_style)

    def extract_answer(self, text: str) -> str | None:
        """The last answer block's content, else the last `\\boxed{…}`'s."""
        return extract_math_answer(text)

    def check(self, answer_text: str, ground_truth: Mapping[str, Any]) -> bool:
        given = extract_math_answer(answer_text)
        return given is not None and equivalent(given, ground_truth["answer"])

    def verify(self, answer_text: str, ground_truth: Mapping[str, Any]) -> bool:
        """As `Task.verify`, but a missing math-verify is a `UserError` (one readable line), not
        every answer silently wrong."""
        load_math_verify()
        return super().verify(answer_text, ground_truth)

    def score(self, solution_str: str, ground_truth: Mapping[str, Any]) -> float:
        """0 without an answer (block or `\\boxed{}`), else the format or the correct score."""
        response = response_part(solution_str)
        if extract_math_answer(response) is None:
            return 0.0
        return self.correct_score if self.verify(response, ground_truth) else self.format_score

    def difficulty(self, ground_truth: Mapping[str, Any]) -> str:
        """MATH's level, or "all" when the row has none (GSM8K)."""
        return ground_truth.get("difficulty") or "all"

    def check_ground_truth(self, ground_truth: Any) -> dict[str, Any]:
        from calibrl.tasks.math_task.data import math_ground_truth

        return math_ground_truth(ground_truth)

    def problem_key(self, ground_truth: Mapping[str, Any]) -> Hashable:
        """The problem, up to spacing."""
        return " ".join(ground_truth["question"].split())

    def convert_file(self, path: str | Path, *, n: int | None = None,
                     test_size: int | None = None, test_fraction: float | None = None,
                     solve: bool = True) -> Conversion:
        """GSM8K, MATH or `{question, answer}` rows (`convert_math_file`), read under
        `columns`; `solve` does not apply: the answers are given."""
        from calibrl.tasks.math_task.data import convert_math_file

        return convert_math_file(path, n=n, test_size=test_size, test_fraction=test_fraction,
                                 style=self.prompt_style, columns=dict(self.columns))

    def arrow_schema(self) -> pa.Schema:
        from calibrl.tasks.math_task.data import arrow_schema

        return arrow_schema()

    def reference_trace(self, example: TaskExample, rng: random.Random | None = None,
                        failed_attempts: int = 0) -> str | None:
        """The reference answer after an empty think block (the worked solutions are not
        kept)."""
        return answer_trace([], example.ground_truth["answer"])

    def corpus_texts(self, rng: random.Random) -> list[str]:
        """The instruction, and sample problems in each style."""
        texts = [INSTRUCTION]
        texts += [m["content"] for question in _CORPUS_QUESTIONS for style in PROMPT_STYLES
                  for m in make_messages({"question": question}, style)]
        return texts
