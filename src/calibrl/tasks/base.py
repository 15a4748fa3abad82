"""The protocol's `Task` interface and the one safe verifier.

Every layer that needs something task-specific (a prompt, an answer check, problems, SFT traces,
a file's Arrow schema) asks the task registered for the row's `data_source`
(`calibrl.tasks.registry`); nothing outside a task's own package and the registry imports a task
implementation.

Why `Task` lives here and not in `calibrl.protocol`: the protocol package holds the conventions
that are plain data (tags, prompt texts, mode specs) and imports nothing of calibrl but
`errors`; a task's verifier needs a wall-clock limit (`calibrl.utils.timeout`) and its examples
are `calibrl.data` values. So `calibrl.tasks` is the layer right above the protocol and the data,
and `calibrl.tasks.Task` is the protocol's task. This module imports no task and no registry, so
a task's own modules can build on it without an import circle.

Implementing a task: subclass `Task`, set `name`, implement `make_prompt`, `check` and `score`;
the rest have defaults that either fit any task (`extract_answer`: the last answer block,
`extra_scores`: none, `difficulty`, `problem_key`, `readout_cluster`: the problem,
`check_ground_truth`, `arrow_schema`: the types Arrow infers) or say the task does not support
it (`generate`, `convert_file`: `UserError`; SFT traces: None).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from calibrl.errors import UserError
from calibrl.protocol.completions import last_answer, response_part
from calibrl.utils.timeout import time_limit

if TYPE_CHECKING:
    import random

    import pyarrow as pa

    from calibrl.data.example import TaskExample

Messages = list[dict[str, str]]
DataSplit = tuple[list["TaskExample"], list["TaskExample"]]  # (train, test)
VERIFY_TIMEOUT_S = 1.0
DEFAULT_TASK = "countdown"  # the task of files and commands that name none (TRL columns, probe)


def safe_verify(check: Callable[[str, Mapping[str, Any]], Any], answer_text: str,
                ground_truth: Mapping[str, Any], timeout_s: float | None = VERIFY_TIMEOUT_S
                ) -> bool:
    """`bool(check(answer_text, ground_truth))`, or False if it raises or runs past `timeout_s`.

    The one place where a verifier failing on model output becomes a wrong answer: hostile text
    must not kill a training step, an evaluation or the probe. The limit is only enforced in the
    main thread (`calibrl.utils.timeout`).
    """
    try:
        with time_limit(timeout_s):
            return bool(check(answer_text, ground_truth))
    except Exception:  # CallTimeout included
        return False


@dataclass(frozen=True)
class Conversion:
    """What `Task.convert_file` made of a file."""

    train: list[TaskExample]
    test: list[TaskExample]
    rows_read: int
    duplicates: int  # the same problem as an earlier row (`Task.problem_key`): dropped
    unsolvable: int  # no reference solution exists (only counted when solving): dropped


class Task(ABC):
    """A verifiable task.

    Attributes:
        name: canonical `data_source` value written into data files.
        aliases: other `data_source` values the task answers to (`register_task`).
        failure_score: what the reward manager writes when scoring a row fails or times out.
        verify_timeout_s: wall-clock limit of one `verify` call (None: no limit).
        prompt_styles: the styles `make_prompt` accepts, the default first.
        generate_options: the keyword options of `generate` and their defaults (help texts
            show them).
    """

    name: str
    aliases: tuple[str, ...] = ()
    failure_score: float = 0.0
    verify_timeout_s: float | None = VERIFY_TIMEOUT_S
    prompt_styles: tuple[str, ...] = ("default",)
    generate_options: Mapping[str, Any] = {}

    # --- prompts and answers -----------------------------------------------------------------

    @abstractmethod
    def make_prompt(self, ground_truth: Mapping[str, Any], style: str | None = None) -> Messages:
        """Chat messages (`[{"role": ..., "content": ...}]`) that pose this problem."""

    def extract_answer(self, text: str) -> str | None:
        """The answer a completion (or its answer part) gives, or None if it gives none.
        Default: the content of its last `<answer>…</answer>` block."""
        return last_answer(text)

    @abstractmethod
    def check(self, answer_text: str, ground_truth: Mapping[str, Any]) -> bool:
        """The task's own verifier. May raise or run long on hostile text: call `verify`."""

    def verify(self, answer_text: str, ground_truth: Mapping[str, Any]) -> bool:
        """True iff `answer_text` (a completion, or its answer part) is correct. Never raises:
        an exception or a timeout in `check` is a failed verification."""
        return safe_verify(self.check, answer_text, ground_truth, self.verify_timeout_s)

    @abstractmethod
    def score(self, solution_str: str, ground_truth: Mapping[str, Any]) -> float:
        """Reward-manager score (verl/TinyZero semantics) of a decoded response, or of prompt and
        response as one string (the prompt part is skipped, `response_part`)."""

    def extra_scores(self, answer_text: str, ground_truth: Mapping[str, Any]
                     ) -> dict[str, float]:
        """Scores of one answer beside `verify`'s right or wrong, by name, that evaluation
        averages and reports next to accuracy (short answer: `{"token_f1": ...}`).
        `answer_text` as `verify` takes it; every answer of a task gets the same names. Must not
        raise on model output. Default: none."""
        return {}

    def difficulty(self, ground_truth: Mapping[str, Any]) -> str:
        """A short label of the problem's difficulty group (metrics are reported per group)."""
        return "all"

    # --- problems ------------------------------------------------------------------------------

    def check_ground_truth(self, ground_truth: Any) -> dict[str, Any]:
        """`ground_truth` read from a file, checked and normalised; `UserError` if unusable."""
        if not isinstance(ground_truth, Mapping):
            raise UserError(f"ground_truth is {ground_truth!r}, expected a mapping")
        return dict(ground_truth)

    def problem_key(self, ground_truth: Mapping[str, Any]) -> Hashable:
        """Equal keys are the same problem (duplicates, and held-out problems kept out of SFT)."""
        return json.dumps(ground_truth, sort_keys=True, default=str)

    def readout_cluster(self, ground_truth: Mapping[str, Any]) -> Hashable:
        """The cluster whose answers the evaluation keeps together: in one fold of the readout
        reference (`calibrl.algo.readout`) and of the difficulty table, and in one draw of
        the bootstrap — problems that share what a probe could learn from one to score another
        (the facts task: a country's questions). Default: the problem itself, `problem_key`
        (Countdown: each problem its own cluster)."""
        return self.problem_key(ground_truth)

    def generate(self, n: int, *, seed: int = 0, test_size: int | None = None,
                 test_fraction: float | None = None, style: str | None = None,
                 **options: Any) -> DataSplit:
        """`n` new problems as `(train, test)` examples with prompts in `style`."""
        raise UserError(f"task {self.name!r} cannot generate problems")

    def convert_file(self, path: str | Path, *, n: int | None = None,
                     test_size: int | None = None, test_fraction: float | None = None,
                     solve: bool = True) -> Conversion:
        """Problems read from a file of another project, as this task's train/test examples."""
        raise UserError(f"task {self.name!r} cannot convert data files")

    def arrow_schema(self) -> pa.Schema | None:
        """The parquet schema of this task's rows (`calibrl.data.verl_schema` with the task's
        ground_truth and extra_info types), or None to store the types Arrow infers."""
        return None

    # --- supervised warm-up --------------------------------------------------------------------

    def reference_trace(self, example: TaskExample, rng: random.Random | None = None,
                        failed_attempts: int = 0) -> str | None:
        """A correct turn-1 completion (`<think>` steps, then the answer), or None if the
        example carries no reference solution. A task that can show search writes up to
        `failed_attempts` failed attempts (drawn with `rng`) before the right one; others
        ignore both."""
        return None

    def wrong_trace(self, example: TaskExample, rng: random.Random,
                    failed_attempts: int = 0) -> str | None:
        """A plausible turn-1 completion that fails `verify`, or None if none can be made;
        `failed_attempts` as in `reference_trace`."""
        return None

    # The turn-2 analyses the warm-up draws at random (`sft.analysis: neutral`), each true of
    # any answer of the task, so that none says whether the answer is right; a task whose
    # answers have parts to check (Countdown's arithmetic) names them in its own. Their words
    # are whole tokens of the tiny model's tokenizer (`models.corpus.EXTRA_WORDS`), so each
    # fits a short confidence turn.
    neutral_analyses: ClassVar[tuple[str, ...]] = (
        "I checked my answer once more.",
        "Let me check my answer again.",
        "This is the first answer I found.",
        "I checked that my answer is the same as before.",
    )

    def analysis(self, answer_text: str, ground_truth: Mapping[str, Any]) -> str | None:
        """A factual examination of an answer (a completion or its answer part) that the
        warm-up can teach as the turn-2 `<analysis>` (`sft.analysis: task`), or None if the task
        has none. It must state facts a model can read off its own answer and the problem
        (Countdown: which given numbers the answer uses), never whether the answer is right:
        turning that into a confidence is left to RL."""
        return None

    def corpus_texts(self, rng: random.Random) -> list[str]:
        """Sample prompt texts in every style, for fitting a tokenizer to this task."""
        return []


class AnswerBlockTask(Task):
    """A task whose answer is the last `<answer>` block of the response, scored the verl way:
    0 without an answer block, `format_score` when the answer is wrong, `correct_score` when
    `verify` accepts it. Subclasses set both scores (e.g. as dataclass fields)."""

    correct_score: float
    format_score: float

    def score(self, solution_str: str, ground_truth: Mapping[str, Any]) -> float:
        """The score of a decoded response, or of prompt and response as one string."""
        response = response_part(solution_str)
        if last_answer(response) is None:
            return 0.0
        return self.correct_score if self.verify(response, ground_truth) else self.format_score
