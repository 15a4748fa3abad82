"""Calibration rewards: accuracy, Brier, and the single-turn RLCR reward.

Two-turn RLCR scores turn 1 with `accuracy_reward` (0/1 from the task's verifier) and each turn-2
confidence with `brier_reward(acc, text) = 1 - (acc - c)^2`, or 0 when `c` cannot be parsed.
Single-turn RLCR (Damani et al. 2025, "Beyond Binary Rewards") scores one completion that holds
answer and confidence with `rlcr_reward = acc + brier`, the Brier term gated on the format.

Every function here takes model output and never raises on it, and never returns NaN.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, CONFIDENCE_CLOSE, CONFIDENCE_OPEN
from calibrl.tasks import DEFAULT_TASK, get_task

# A plain decimal number, optionally with an exponent and a trailing percent sign. ASCII digits
# only: Python's float() would also read Arabic-Indic or full-width digits, which no prompt
# asks for.
_NUMBER = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*(%?)", re.ASCII
)


def parse_confidence(text: str) -> float | None:
    """The confidence in the last `<confidence>…</confidence>` block of `text`, or None.

    The block is the last opening tag that is closed, with the first closing tag after it: repeated
    blocks give the last value, nested tags the innermost last one, and a trailing unclosed tag (a
    truncated completion) does not hide an earlier complete block. Its content, stripped of
    whitespace, must be exactly one number: `0.8`, `.8`, `1`, `8e-1`, `+0.5`; `-0` reads as 0.

    Also accepted: a percentage, `80%` or `80 %` -> 0.8. Models often verbalise confidence that
    way and the meaning is unambiguous. A bare `80` is *not* rescaled: it could be a mistake on any
    scale, so it is out of range like any other number above 1.

    Rejected (None): no complete block, anything besides the number (`0.8 or so`, `high`), `nan`,
    `inf`, numbers that overflow (`1e999`), and values outside [0, 1] after the percent rescale.
    """
    if not isinstance(text, str):
        return None
    close = text.rfind(CONFIDENCE_CLOSE)
    if close == -1:
        return None
    open_ = text.rfind(CONFIDENCE_OPEN, 0, close)
    if open_ == -1:
        return None
    close = text.find(CONFIDENCE_CLOSE, open_)  # the block this opening tag starts (nesting)
    match = _NUMBER.fullmatch(text[open_ + len(CONFIDENCE_OPEN) : close].strip())
    if match is None:
        return None
    value = float(match.group(1))  # the regex admits only what float() reads; huge -> inf
    if match.group(2):
        value /= 100.0
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return None
    return value + 0.0  # turns -0.0 into 0.0


def _as_correct(correct: bool | float) -> float:
    acc = float(correct)
    if acc not in (0.0, 1.0):
        raise ValueError(f"correct must be 0/1 or a bool, got {correct!r}")
    return acc


def accuracy_reward(
    answer_text: str, ground_truth: Mapping[str, Any], data_source: str = DEFAULT_TASK
) -> float:
    """1.0 if the task's verifier accepts `answer_text`, else 0.0: the answer reward of every mode.

    `answer_text` is the turn-1 completion (or just its answer part); `Task.verify` of the task
    registered for `data_source` decides, and counts a verifier failure on hostile text as wrong.
    """
    return 1.0 if get_task(data_source).verify(answer_text, ground_truth) else 0.0


def correctness_reward(correct: bool | float, completion_text: str) -> float:
    """1.0 for a correct answer, else 0.0: the turn-1 reward of RLVR and two-turn RLCR.

    `completion_text` is unused; it is there so every mode's reward has one signature
    (`calibrl.protocol.modes.ModeSpec.answer_reward`).
    """
    return _as_correct(correct)


def brier_reward(correct: bool | float, confidence_text: str) -> float:
    """`1 - (correct - c)^2` with `c = parse_confidence(confidence_text)`; 0.0 if `c` is None.

    `correct` is the accuracy label (0/1) of the answer this confidence is about. 0 is also the
    worst parseable outcome (c = 1 on a wrong answer, c = 0 on a right one), so breaking the format
    never pays. Range [0, 1].
    """
    acc = _as_correct(correct)
    confidence = parse_confidence(confidence_text)
    if confidence is None:
        return 0.0
    return 1.0 - (acc - confidence) ** 2


def _rlcr_confidence(completion_text: str) -> float | None:
    """The confidence of a well-formed single-turn RLCR completion, else None (see below)."""
    if not isinstance(completion_text, str):
        return None
    answer_open = completion_text.find(ANSWER_OPEN)
    if answer_open == -1:
        return None
    answer_close = completion_text.find(ANSWER_CLOSE, answer_open + len(ANSWER_OPEN))
    if answer_close == -1:
        return None
    return parse_confidence(completion_text[answer_close + len(ANSWER_CLOSE) :])


def rlcr_format_ok(completion_text: str) -> bool:
    """Single-turn RLCR format: an `<answer>…</answer>` block, then a parseable confidence block.

    `<think>` and `<analysis>` are asked for by the prompt but not required here: the mask trains
    them either way, and the reward gates only what it scores (answer, then confidence).
    """
    return _rlcr_confidence(completion_text) is not None


def rlcr_reward(correct: bool | float, completion_text: str) -> float:
    """Single-turn RLCR reward: `correct + brier`, the Brier term 0 unless `rlcr_format_ok`.

    The paper writes `R = 1[correct] - (c - 1[correct])^2`, which is this minus 1; a constant shift
    changes no group-normalised advantage, and this form keeps the reward in [0, 2] with a
    malformed completion scored like the worst-calibrated well-formed one (Brier term 0), so
    dropping the confidence never beats giving one. `correct` comes from the task's verifier.
    """
    acc = _as_correct(correct)
    confidence = _rlcr_confidence(completion_text)
    if confidence is None:
        return acc
    return acc + 1.0 - (acc - confidence) ** 2
