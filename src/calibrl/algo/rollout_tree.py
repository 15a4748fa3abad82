"""The rollout tree: prompt j -> its G_a answers k -> each answer's G_c confidences h.

One structure serves every training mode (`calibrl.protocol.modes`): answers hold the turn-1
completions (for single-turn RLCR, answer, analysis and confidence in one); in a mode with a
confidence turn each answer has confidence samples generated in a second turn (context = prompt +
answer + inserted user question), in the others it has none.

`iter_rows` walks the tree in the order every consumer uses (batch, advantages, stats): each
answer, then its confidences, prompt by prompt. Group ids are positions in that walk, so a tree
whose prompts have different numbers of answers (rows dropped) still groups correctly.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from calibrl.protocol.modes import ModeSpec, get_mode

# sample_type values in a TrainBatch.
ANSWER, CONFIDENCE = 0, 1
SAMPLE_TYPE_NAMES = {ANSWER: "answer", CONFIDENCE: "confidence"}


@dataclass
class Sample:
    """One generated completion.

    Attributes:
        context_ids: the full token context it was generated from (turn 1: the templated prompt;
            turn 2: prompt + answer + inserted user turn + generation prompt). Never trained.
        token_ids: the generated token ids, `[T]` (EOS included when the sampler emitted it).
        text: the decoded completion (for rewards and logs; masks decode `token_ids` themselves).
        logprobs: sampling log-prob of each generated token, `[T]`, or None if not recorded
            (for inspection only: training takes old log-probs from the policy itself).
        finish_reason: "stop" or "length".
        reward: the scalar reward of this completion (accuracy, Brier, or RLCR reward).
    """

    context_ids: list[int]
    token_ids: list[int]
    text: str
    logprobs: list[float] | None = None
    finish_reason: str = "stop"
    reward: float = 0.0

    def __post_init__(self) -> None:
        if self.logprobs is not None and len(self.logprobs) != len(self.token_ids):
            raise ValueError(
                f"{len(self.logprobs)} logprobs for {len(self.token_ids)} generated tokens"
            )


@dataclass
class AnswerNode:
    """Answer k of a prompt: its turn-1 sample, its accuracy label and its turn-2 children."""

    sample: Sample
    correct: bool | None = None
    confidences: list[Sample] = field(default_factory=list)


@dataclass
class PromptNode:
    """Prompt j: `index` is its row in the dataset, `answers` its G_a answer nodes."""

    index: int
    data_source: str
    ground_truth: Mapping[str, Any]
    answers: list[AnswerNode] = field(default_factory=list)


@dataclass
class RolloutTree:
    """The samples of one rollout; `mode` is a registered mode name (`UserError` otherwise)."""

    mode: str
    prompts: list[PromptNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        get_mode(self.mode)

    @property
    def spec(self) -> ModeSpec:
        return get_mode(self.mode)

    def validate(self) -> None:
        """Raise ValueError if the shape contradicts the mode (confidences without a confidence
        turn)."""
        if self.spec.has_confidence_turn:
            return
        for prompt in self.prompts:
            for answer in prompt.answers:
                if answer.confidences:
                    raise ValueError(f"mode {self.mode!r} trees have no confidence samples")

    @property
    def num_answers(self) -> int:
        return sum(len(p.answers) for p in self.prompts)

    @property
    def num_confidences(self) -> int:
        return sum(len(a.confidences) for p in self.prompts for a in p.answers)


@dataclass(frozen=True)
class Row:
    """One training row: a sample with its type and group ids.

    `prompt_group` is the prompt's position in the tree, `answer_group` the answer's position
    among all answers of the tree (a confidence row carries its parent answer's id).
    """

    sample: Sample
    sample_type: int
    prompt_group: int
    answer_group: int
    answer: AnswerNode


def iter_rows(tree: RolloutTree) -> Iterator[Row]:
    """Each answer, then its confidences; prompt by prompt."""
    answer_group = 0
    for prompt_group, prompt in enumerate(tree.prompts):
        for answer in prompt.answers:
            yield Row(answer.sample, ANSWER, prompt_group, answer_group, answer)
            for confidence in answer.confidences:
                yield Row(confidence, CONFIDENCE, prompt_group, answer_group, answer)
            answer_group += 1
