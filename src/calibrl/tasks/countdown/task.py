"""The Countdown task: the `Task` interface on top of the prompts, reward, generator and traces.

The data-set functions (`calibrl.tasks.countdown.data`) are imported when first used: they need
the parquet reader (pyarrow), which scoring a completion does not.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from calibrl.tasks.base import Conversion, DataSplit, Messages, Task
from calibrl.tasks.countdown import traces
from calibrl.tasks.countdown.check import numbers_check
from calibrl.tasks.countdown.generate import (
    DEFAULT_MAX_NUMBER,
    DEFAULT_NUM_NUMBERS,
    DEFAULT_TARGET_RANGE,
    generate_countdown,
    instance_key,
)
from calibrl.tasks.countdown.prompts import (
    DEFAULT_PROMPT_STYLE,
    PROMPT_STYLES,
    SYSTEM_PROMPT,
    compact_prompt,
    make_messages,
    short_prompt,
    user_prompt,
)
from calibrl.tasks.countdown.reward import compute_score, extract_solution, verify_equation_strict
from calibrl.tasks.splits import DEFAULT_TEST_FRACTION

if TYPE_CHECKING:
    import random

    import pyarrow as pa

    from calibrl.data.example import TaskExample


@dataclass(frozen=True)
class CountdownTask(Task):
    """Countdown: reach `target` with each of `numbers` once, using + - * / and brackets.

    Ground truth `{"target": int, "numbers": [int, ...]}`; an example's `extra` holds the
    solver's `"solution"` and `"steps"` when it has a reference solution.
    """

    name: str = "countdown"
    aliases = ("countdown_3to4", "countdown_tasks")  # names other Countdown files use
    format_score: float = 0.1
    correct_score: float = 1.0
    failure_score: float = 0.0
    prompt_style: str = DEFAULT_PROMPT_STYLE  # a key of PROMPT_STYLES

    prompt_styles = tuple(PROMPT_STYLES)
    neutral_analyses = (
        "I checked each step of the equation.",
        "I used each number once and checked the result against the target.",
        "Let me check the arithmetic of each step.",
        "The answer uses the given numbers with basic operations.",
        "I compared the result of the last step with the target.",
        "I checked the order of the operations in the equation.",
    )
    generate_options = MappingProxyType({
        "num_numbers": DEFAULT_NUM_NUMBERS, "max_number": DEFAULT_MAX_NUMBER,
        "target_range": DEFAULT_TARGET_RANGE, "size_weights": None,
        "test_fraction": DEFAULT_TEST_FRACTION,  # when neither test option is given
    })

    def make_prompt(self, ground_truth: Mapping[str, Any], style: str | None = None) -> Messages:
        return make_messages(ground_truth, style or self.prompt_style)

    def extract_answer(self, text: str) -> str | None:
        """The equation in the last answer block of the last line (the reference extractor)."""
        return extract_solution(text)

    def check(self, answer_text: str, ground_truth: Mapping[str, Any]) -> bool:
        return verify_equation_strict(answer_text, ground_truth["target"], ground_truth["numbers"])

    def score(self, solution_str: str, ground_truth: Mapping[str, Any]) -> float:
        return compute_score(
            solution_str, ground_truth, format_score=self.format_score, score=self.correct_score
        )

    def difficulty(self, ground_truth: Mapping[str, Any]) -> str:
        """How many numbers the problem has: the main driver of how hard it is."""
        return f"{len(ground_truth['numbers'])} numbers"

    def check_ground_truth(self, ground_truth: Any) -> dict[str, Any]:
        from calibrl.tasks.countdown.data import countdown_ground_truth

        return countdown_ground_truth(ground_truth)

    def problem_key(self, ground_truth: Mapping[str, Any]) -> Hashable:
        """(sorted numbers, target)."""
        return instance_key(list(ground_truth["numbers"]), int(ground_truth["target"]))

    def generate(self, n: int, *, seed: int = 0, test_size: int | None = None,
                 test_fraction: float | None = None, style: str | None = None,
                 **options: Any) -> DataSplit:
        """Solvable instances (`generate_countdown`, whose keyword options `options` are) with
        their reference solutions."""
        from calibrl.tasks.countdown.data import examples_from_instances

        train, test = generate_countdown(n, seed=seed, test_size=test_size,
                                         test_fraction=test_fraction, **options)
        style = style or self.prompt_style
        return examples_from_instances(train, "train", style), examples_from_instances(
            test, "test", style)

    def convert_file(self, path: str | Path, *, n: int | None = None,
                     test_size: int | None = None, test_fraction: float | None = None,
                     solve: bool = True) -> Conversion:
        """A TinyZero/verl or `{target, nums}` file (`convert_countdown_file`)."""
        from calibrl.tasks.countdown.data import convert_countdown_file

        return convert_countdown_file(path, self, n=n, test_size=test_size,
                                      test_fraction=test_fraction, solve_rows=solve)

    def arrow_schema(self) -> pa.Schema:
        from calibrl.tasks.countdown.data import arrow_schema

        return arrow_schema()

    def reference_trace(self, example: TaskExample, rng: random.Random | None = None,
                        failed_attempts: int = 0) -> str | None:
        """The solver's steps; with `failed_attempts`, that many (at most) failed attempts
        first (`traces.with_failed_attempts`)."""
        trace = traces.reference_trace(example.extra)
        if trace is None or rng is None:
            return trace
        return traces.with_failed_attempts(trace, example.ground_truth, failed_attempts, rng)

    def wrong_trace(self, example: TaskExample, rng: random.Random,
                    failed_attempts: int = 0) -> str | None:
        solution = example.extra.get("solution")
        trace = traces.wrong_trace(solution, example.ground_truth, rng) if solution else None
        if trace is None:
            return None
        return traces.with_failed_attempts(trace, example.ground_truth, failed_attempts, rng)

    def analysis(self, answer_text: str, ground_truth: Mapping[str, Any]) -> str:
        """Which given numbers the answer's equation uses (`check.numbers_check`)."""
        return numbers_check(extract_solution(answer_text), ground_truth["numbers"])

    def corpus_texts(self, rng: random.Random) -> list[str]:
        """The system prompt, then the question in each style for 3 to 6 numbers."""
        texts = [SYSTEM_PROMPT]
        for size in (3, 4, 5, 6):
            nums = [rng.randint(1, 99) for _ in range(size)]
            for prompt in (user_prompt, short_prompt, compact_prompt):
                texts.append(prompt(nums, rng.randint(1, 999)))
        return texts
