"""The short-answer task: a factual question (HotpotQA, TriviaQA, SimpleQA) answered by a short
phrase in `<answer>…</answer>`, right iff it matches an accepted answer after SQuAD's
normalisation (`calibrl.tasks.short_answer.normalize`).

Scoring follows the verl convention the other tasks use (`Task.score`): 0 when the response has
no answer block, `format_score` (0.1) when its answer is wrong, `correct_score` (1.0) when it is
right; `verify` is True exactly when `score` gives `correct_score`. Beside right or wrong,
`extra_scores` gives SQuAD's token F1, the partial credit these data sets also report.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from calibrl.protocol.completions import answer_trace, last_answer
from calibrl.tasks.base import AnswerBlockTask, Conversion, Messages
from calibrl.tasks.short_answer.facts import (
    ATTRIBUTES,
    DEFAULT_GROUPS,
    DEFAULT_VALUES_PER_ATTRIBUTE,
    country_of,
    generate_facts,
)
from calibrl.tasks.short_answer.normalize import exact_match, max_token_f1
from calibrl.tasks.short_answer.prompts import (
    DEFAULT_PROMPT_STYLE,
    INSTRUCTION,
    PROMPT_STYLES,
    make_messages,
)
from calibrl.tasks.short_answer.replies import names_accepted
from calibrl.tasks.short_answer.world_types import world_cluster

if TYPE_CHECKING:
    import random

    import pyarrow as pa

    from calibrl.data.example import TaskExample

F1_SCORE = "token_f1"  # the name `extra_scores` reports SQuAD's token F1 under
LENIENT_SCORE = "lenient_accuracy"  # and the lenient reading of a reply
_CORPUS_QUESTIONS = ("Which city is the capital of France?",
                     "Who wrote the novel that the film Sunset Boulevard is not based on?")


@dataclass(frozen=True)
class ShortAnswerTask(AnswerBlockTask):
    """Answer a question with a short phrase; right iff it normalises to an accepted answer.

    Ground truth `{"question": str, "answers": [str, ...], "difficulty": str | None}` (see
    `calibrl.tasks.short_answer.data`).
    """

    name: str = "short_answer"
    aliases = ("short-answer",)
    format_score: float = 0.1
    correct_score: float = 1.0
    failure_score: float = 0.0
    prompt_style: str = DEFAULT_PROMPT_STYLE  # a key of PROMPT_STYLES
    # Columns of the data `convert_file` reads under other names, as (target, source) pairs
    # (`calibrl data ... data.columns.TARGET=SOURCE`); a tuple, so the task stays hashable.
    columns: tuple[tuple[str, str], ...] = ()

    prompt_styles = tuple(PROMPT_STYLES)
    generate_options = {"groups": DEFAULT_GROUPS, "group_weights": None,
                        "values_per_attribute": DEFAULT_VALUES_PER_ATTRIBUTE}

    def make_prompt(self, ground_truth: Mapping[str, Any], style: str | None = None) -> Messages:
        return make_messages(ground_truth, style or self.prompt_style)

    def check(self, answer_text: str, ground_truth: Mapping[str, Any]) -> bool:
        """The last answer block normalises to the same non-empty text as an accepted answer."""
        given = last_answer(answer_text)
        return given is not None and exact_match(given, ground_truth["answers"])

    def extra_scores(self, answer_text: str, ground_truth: Mapping[str, Any]
                     ) -> dict[str, float]:
        """`{"token_f1": F1, "lenient_accuracy": 0 or 1}`: SQuAD's token F1 of the last answer
        block against the best accepted answer (0.0 without an answer block or text), and the
        lenient reading (`replies.names_accepted`): 1.0 when the reply names an accepted answer,
        in its answer block or, without one, anywhere, so a pretrained model that answers in
        sentences is judged alike before and after it learns the tags. Never a reward."""
        given = last_answer(answer_text) if isinstance(answer_text, str) else None
        try:
            f1 = 0.0 if given is None else max_token_f1(given, ground_truth["answers"])
            named = names_accepted(answer_text, ground_truth["answers"])
        except Exception:  # a malformed ground truth must not stop an evaluation either
            f1, named = 0.0, False
        return {F1_SCORE: f1, LENIENT_SCORE: float(named)}

    def difficulty(self, ground_truth: Mapping[str, Any]) -> str:
        """The row's own difficulty (HotpotQA's level), or "all" when it has none."""
        return ground_truth.get("difficulty") or "all"

    def check_ground_truth(self, ground_truth: Any) -> dict[str, Any]:
        from calibrl.tasks.short_answer.data import short_answer_ground_truth

        return short_answer_ground_truth(ground_truth)

    def problem_key(self, ground_truth: Mapping[str, Any]) -> Hashable:
        """The question, up to spacing."""
        from calibrl.tasks.short_answer.data import question_key

        return question_key(ground_truth["question"])

    def readout_cluster(self, ground_truth: Mapping[str, Any]) -> Hashable:
        """A generated fact's country ("country: Daruvin"): its four questions share one fold
        of the readout reference, so the probe never scores a fact after seeing its country's
        others. A world fact's subject likewise (`world_facts.world_cluster`: "country: France"
        for its capital, continent and currency; "city: Osaka"). Any other question (a public
        data set's) is its own cluster, `problem_key`; one that happens to fit a template ("Who
        rules France?") clusters by that country."""
        question = ground_truth["question"]
        cluster = world_cluster(question)
        if cluster is not None:
            return cluster
        country = country_of(question)
        return self.problem_key(ground_truth) if country is None else f"country: {country}"

    def generate(self, n: int, *, seed: int = 0, test_size: int | None = None,
                 test_fraction: float | None = None, style: str | None = None,
                 **options: Any) -> tuple[list[TaskExample], list[TaskExample]]:
        """`n` facts of a made-up world (`generate_facts`, whose keyword options `options`
        are), each country's exposure group its difficulty."""
        from calibrl.tasks.short_answer.data import examples_from_facts

        train, test = generate_facts(n, seed=seed, test_size=test_size,
                                     test_fraction=test_fraction, **options)
        style = style or self.prompt_style
        return examples_from_facts(train, "train", style), examples_from_facts(test, "test", style)

    def convert_file(self, path: str | Path, *, n: int | None = None,
                     test_size: int | None = None, test_fraction: float | None = None,
                     solve: bool = True) -> Conversion:
        """TriviaQA, HotpotQA or `{question, answers}` rows (`convert_answer_file`), read
        under `columns`; `solve` does not apply: the answers are given."""
        from calibrl.tasks.short_answer.data import convert_answer_file

        return convert_answer_file(path, n=n, test_size=test_size, test_fraction=test_fraction,
                                   style=self.prompt_style, columns=dict(self.columns))

    def arrow_schema(self) -> pa.Schema:
        from calibrl.tasks.short_answer.data import arrow_schema

        return arrow_schema()

    def reference_trace(self, example: TaskExample, rng: random.Random | None = None,
                        failed_attempts: int = 0) -> str | None:
        """The first accepted answer after the example's reasoning steps (`extra["steps"]`,
        e.g. the model's own sentence naming it; usually none: the data sets give no reasoning,
        and a recalled fact has no search to show)."""
        return answer_trace(list(example.extra.get("steps") or ()),
                            example.ground_truth["answers"][0])

    # No wrong_trace: one row holds no plausible wrong answer (a made-up one would teach the
    # confidence turn that wrong answers look made up).

    def analysis(self, answer_text: str, ground_truth: Mapping[str, Any]) -> str:
        """The question again and the answer given to it ("What is the capital of Daruvin? My
        answer: Tesho."): a recalled fact has no working to examine, and restating the pair
        right before the confidence puts what the model knows about it next to where it says
        how sure it is; never whether the answer is right."""
        given = last_answer(answer_text) if isinstance(answer_text, str) else None
        return f"{ground_truth['question']} My answer: {'none' if given is None else given}."

    def corpus_texts(self, rng: random.Random) -> list[str]:
        """The instruction, and sample questions in each style: the generated world's question
        templates among them (its made-up names are left out, so they encode in pieces)."""
        questions = (*_CORPUS_QUESTIONS, *(template.format("X") for _, template in ATTRIBUTES))
        texts = [INSTRUCTION]
        texts += [m["content"] for question in questions for style in PROMPT_STYLES
                  for m in make_messages({"question": question}, style)]
        return texts
