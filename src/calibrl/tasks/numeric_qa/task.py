"""The numeric QA task: a question whose answer is one number, checked by exact value.

Scoring follows the verl convention Countdown uses (`Task.score`): 0 when the response has no
`<answer>…</answer>` block, `format_score` (0.1) when it has one whose content is not exactly
the right number (a wrong number, or anything that is not a strict numeric literal), and
`correct_score` (1.0) when it is. `verify` (what training, evaluation and the probe use) is
True exactly when `score` would give `correct_score`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from calibrl.protocol.completions import last_answer
from calibrl.tasks.base import AnswerBlockTask, Conversion, DataSplit, Messages
from calibrl.tasks.numeric_qa import traces
from calibrl.tasks.numeric_qa.generate import (
    DEFAULT_MAX_OPERAND,
    DEFAULT_NUM_STEPS,
    OPERATIONS,
    PEOPLE,
    THINGS,
    draw_problem,
    generate_word_problems,
)
from calibrl.tasks.numeric_qa.numbers import parse_answer, parse_truth
from calibrl.tasks.numeric_qa.prompts import (
    DEFAULT_PROMPT_STYLE,
    INSTRUCTION,
    PROMPT_STYLES,
    make_messages,
)
from calibrl.tasks.splits import DEFAULT_TEST_FRACTION

if TYPE_CHECKING:
    import random

    import pyarrow as pa

    from calibrl.data.example import TaskExample


@dataclass(frozen=True)
class NumericQATask(AnswerBlockTask):
    """Answer a question with one number; right iff its value equals the ground truth's.

    Ground truth `{"question": str, "answer": str, "num_steps": int | None}` (see
    `calibrl.tasks.numeric_qa.data`); an example's `extra` holds `"solution"` and `"steps"`.
    """

    name: str = "numeric_qa"
    aliases = ("numeric-qa",)
    format_score: float = 0.1
    correct_score: float = 1.0
    failure_score: float = 0.0
    prompt_style: str = DEFAULT_PROMPT_STYLE  # a key of PROMPT_STYLES

    prompt_styles = tuple(PROMPT_STYLES)
    generate_options = MappingProxyType({
        "num_steps": DEFAULT_NUM_STEPS, "max_operand": DEFAULT_MAX_OPERAND,
        "test_fraction": DEFAULT_TEST_FRACTION,  # when neither test option is given
    })

    def make_prompt(self, ground_truth: Mapping[str, Any], style: str | None = None) -> Messages:
        return make_messages(ground_truth, style or self.prompt_style)

    def check(self, answer_text: str, ground_truth: Mapping[str, Any]) -> bool:
        """The last answer block holds a strict numeric literal equal to the answer's value."""
        given = parse_answer(last_answer(answer_text))
        return given is not None and given == parse_truth(ground_truth["answer"])

    def difficulty(self, ground_truth: Mapping[str, Any]) -> str:
        """The number of worked steps ("1 step", "2 steps"), or "all" when unknown."""
        steps = ground_truth.get("num_steps")
        if steps is None:
            return "all"
        return f"{steps} step" if steps == 1 else f"{steps} steps"

    def check_ground_truth(self, ground_truth: Any) -> dict[str, Any]:
        from calibrl.tasks.numeric_qa.data import numeric_ground_truth

        return numeric_ground_truth(ground_truth)

    def problem_key(self, ground_truth: Mapping[str, Any]) -> Hashable:
        """The question, up to spacing."""
        from calibrl.tasks.numeric_qa.data import question_key

        return question_key(ground_truth["question"])

    def generate(self, n: int, *, seed: int = 0, test_size: int | None = None,
                 test_fraction: float | None = None, style: str | None = None,
                 **options: Any) -> DataSplit:
        """Word problems (`generate_word_problems`, whose keyword options `options` are) with
        their worked steps."""
        from calibrl.tasks.numeric_qa.data import examples_from_problems

        train, test = generate_word_problems(n, seed=seed, test_size=test_size,
                                             test_fraction=test_fraction, **options)
        style = style or self.prompt_style
        return (examples_from_problems(train, "train", style),
                examples_from_problems(test, "test", style))

    def convert_file(self, path: str | Path, *, n: int | None = None,
                     test_size: int | None = None, test_fraction: float | None = None,
                     solve: bool = True) -> Conversion:
        """`{question, answer}` rows (`convert_question_file`); `solve` does not apply: the
        answers are given."""
        from calibrl.tasks.numeric_qa.data import convert_question_file

        return convert_question_file(path, n=n, test_size=test_size,
                                     test_fraction=test_fraction, style=self.prompt_style)

    def arrow_schema(self) -> pa.Schema:
        from calibrl.tasks.numeric_qa.data import arrow_schema

        return arrow_schema()

    def reference_trace(self, example: TaskExample, rng: random.Random | None = None,
                        failed_attempts: int = 0) -> str | None:
        """The worked steps; a word problem has no search to show, so no failed attempts."""
        return traces.reference_trace(example.extra)

    def wrong_trace(self, example: TaskExample, rng: random.Random,
                    failed_attempts: int = 0) -> str | None:
        return traces.wrong_trace(example.extra, rng,
                                  lambda text: self.verify(text, example.ground_truth))

    def corpus_texts(self, rng: random.Random) -> list[str]:
        """The instruction; each person with each thing, in one and many; each event sentence
        for each pronoun; then questions of 1 to 4 steps in each style."""
        texts = [INSTRUCTION]
        texts += [f"{name} has 1 {singular}. How many {plural} does {name} have now?"
                  for name, _ in PEOPLE for singular, plural in THINGS]
        pronouns = sorted({pronoun for _, pronoun in PEOPLE})  # sorted: a set's order varies
        texts += [template.format(who=pronoun.capitalize(), n=2)
                  for _, templates in OPERATIONS.values() for template in templates
                  for pronoun in pronouns]
        for steps in (1, 2, 3, 4):
            question = draw_problem(steps, DEFAULT_MAX_OPERAND, rng).question
            texts += [m["content"] for style in PROMPT_STYLES
                      for m in make_messages({"question": question}, style)]
        return texts
