"""The training modes, each defined once: a `ModeSpec` per mode, in one registry.

A mode says how a problem becomes samples and rewards: which prompt turn 1 sends and where it
stops, whether a second (confidence) turn follows, which span of each completion trains, and
which reward scores it. Callers ask the spec (`spec.has_confidence_turn`, `spec.answer_prompt`,
`spec.score_answer`, ...) and never compare mode names, so adding a mode is one
`register_mode(ModeSpec(...))` plus the prompt and reward functions it names.

Built in (`mode_names()` lists them; configs and the command line take their choices from it):

- `two_turn`: turn 1 answers (`<think>…</answer>`); each answer then gets confidence completions
  in a second turn, scored by the Brier reward (this project's method);
- `rlcr`: single-turn RLCR; one completion holds answer, analysis and confidence, scored by
  correctness + Brier;
- `rlvr`: plain RLVR; answers only, scored 0/1.

Layering: this package sits at the bottom of calibrl and imports nothing above it. Rewards live
in `calibrl.rewards`, which imports the task registry, so a spec names them as
`"module:function"` and they are imported on first use (a callable works too). Span kinds are
the names `calibrl.algo.masks.span_loss_mask` takes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from calibrl.errors import UserError
from calibrl.protocol.prompts import (
    Messages,
    confidence_messages,
    plain_answer_messages,
    rlcr_answer_messages,
)
from calibrl.protocol.tags import ANSWER_CLOSE, CONFIDENCE_CLOSE

PromptBuilder = Callable[[Sequence[dict[str, str]]], Messages]
ConfidencePromptBuilder = Callable[[Sequence[dict[str, str]], str, str], Messages]
# A reward `(correct: bool, completion_text: str) -> float`, or "module:function" naming one.
RewardRef = str | Callable[[bool, str], float]


def resolve(ref: RewardRef) -> Callable[[bool, str], float]:
    """The function `ref` names ("package.module:function"), imported now; callables as they are."""
    if callable(ref):
        return ref
    module, sep, name = ref.partition(":")
    if not sep:
        raise ValueError(f"reward reference {ref!r} is not 'module:function'")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class ModeSpec:
    """One training mode.

    Attributes:
        name: the value of `algorithm.mode` / `--mode`.
        summary: one line for help texts.
        answer_prompt: task messages -> turn-1 messages.
        answer_stop: stop strings of turn 1.
        answer_span: span kind that turn-1 rows train (`calibrl.algo.masks`).
        answer_reward: `(correct, turn-1 completion) -> reward`.
        confidence_in_answer: turn 1 states a confidence too (single-turn RLCR).
        confidence_prompt: `(task messages, answer text, question) -> turn-2 messages`; None for
            a single-turn mode.
        confidence_stop, confidence_span, confidence_reward: as above, for turn-2 rows.
    """

    name: str
    summary: str
    answer_prompt: PromptBuilder
    answer_stop: tuple[str, ...]
    answer_span: str
    answer_reward: RewardRef
    confidence_in_answer: bool = False
    confidence_prompt: ConfidencePromptBuilder | None = None
    confidence_stop: tuple[str, ...] = (CONFIDENCE_CLOSE,)
    confidence_span: str = "confidence"
    confidence_reward: RewardRef = "calibrl.rewards.calibration:brier_reward"

    @property
    def has_confidence_turn(self) -> bool:
        """Each answer gets confidence completions in a second turn."""
        return self.confidence_prompt is not None

    @property
    def turns(self) -> int:
        return 2 if self.has_confidence_turn else 1

    @property
    def states_confidence(self) -> bool:
        """Some completion states a confidence, so calibration can be measured."""
        return self.confidence_in_answer or self.has_confidence_turn

    def score_answer(self, correct: bool, completion_text: str) -> float:
        """The reward of a turn-1 completion whose answer verified as `correct`."""
        return float(resolve(self.answer_reward)(correct, completion_text))

    def score_confidence(self, correct: bool, completion_text: str) -> float:
        """The reward of a turn-2 completion about an answer that verified as `correct`."""
        return float(resolve(self.confidence_reward)(correct, completion_text))

    def confidence_texts(self, answer_text: str, turn2_texts: Sequence[str]) -> list[str]:
        """The completions that state a confidence about one answer: the answer itself
        (single-turn RLCR), its turn-2 completions, or none."""
        if self.confidence_in_answer:
            return [answer_text]
        return list(turn2_texts) if self.has_confidence_turn else []

    def answer_token_budget(self, max_answer: int, max_confidence: int) -> int:
        """Max new tokens of turn 1: the answer, plus the confidence when turn 1 holds it."""
        return max_answer + (max_confidence if self.confidence_in_answer else 0)

    def max_response_tokens(self, max_answer: int, max_confidence: int) -> int:
        """The longest completion of either turn (Dr. GRPO's constant normaliser)."""
        turn2 = max_confidence if self.has_confidence_turn else 0
        return max(self.answer_token_budget(max_answer, max_confidence), turn2)


_REGISTRY: dict[str, ModeSpec] = {}


def register_mode(spec: ModeSpec) -> ModeSpec:
    """Make `spec` available under `spec.name`; returns it. A name is registered once."""
    if spec.name in _REGISTRY and _REGISTRY[spec.name] != spec:
        raise ValueError(f"mode {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def mode_names() -> tuple[str, ...]:
    """Registered mode names, in registration order (the built-in three first)."""
    return tuple(_REGISTRY)


def get_mode(name: str) -> ModeSpec:
    """The spec registered as `name`; a `UserError` naming the valid modes if there is none."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):  # TypeError: an unhashable value from a config file
        raise UserError(f"unknown mode {name!r}; choose one of {', '.join(_REGISTRY)}") from None


def modes_help() -> str:
    """`"two_turn: ...; rlcr: ...; rlvr: ..."` for help texts."""
    return "; ".join(f"{spec.name}: {spec.summary}" for spec in _REGISTRY.values()) + "."


_CORRECTNESS = "calibrl.rewards.calibration:correctness_reward"

TWO_TURN = register_mode(ModeSpec(
    name="two_turn", summary="answer then confidence turns (this project's method)",
    answer_prompt=plain_answer_messages, answer_stop=(ANSWER_CLOSE,), answer_span="answer",
    answer_reward=_CORRECTNESS, confidence_prompt=confidence_messages,
))
RLCR = register_mode(ModeSpec(
    name="rlcr", summary="one completion with answer and confidence",
    answer_prompt=rlcr_answer_messages, answer_stop=(CONFIDENCE_CLOSE,), answer_span="rlcr",
    answer_reward="calibrl.rewards.calibration:rlcr_reward", confidence_in_answer=True,
))
RLVR = register_mode(ModeSpec(
    name="rlvr", summary="answers only",
    answer_prompt=plain_answer_messages, answer_stop=(ANSWER_CLOSE,), answer_span="answer",
    answer_reward=_CORRECTNESS,
))
DEFAULT_MODE = TWO_TURN.name
