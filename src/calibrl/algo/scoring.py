"""Write rewards into a rollout tree, per its mode (spec §3, "Rewards").

Each answer gets `acc` (0/1 from the task's verifier) and its mode's answer reward of it
(`ModeSpec.score_answer`: `acc` itself for RLVR and two-turn turn 1, `rlcr_reward(acc, text)` for
single-turn RLCR); each confidence sample gets the mode's confidence reward (`brier_reward(acc,
text)`).

The verifier sees a completion up to the end of its last `</answer>`: what follows is not part of
the answer (RLCR's analysis and confidence, or a stray newline), and the Countdown extractor,
which reads only the last line, would otherwise miss an answer followed by more lines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from calibrl.algo.rollout_tree import RolloutTree
from calibrl.errors import UserError
from calibrl.protocol.tags import ANSWER_CLOSE
from calibrl.rewards.calibration import accuracy_reward

Verify = Callable[[str, str, Mapping[str, Any]], bool]


def _task_verify(answer_text: str, data_source: str, ground_truth: Mapping[str, Any]) -> bool:
    return accuracy_reward(answer_text, ground_truth, data_source) == 1.0


def answer_part(text: str) -> str:
    """`text` up to the end of its last `</answer>`, or all of it if there is none."""
    end = text.rfind(ANSWER_CLOSE)
    return text if end == -1 else text[: end + len(ANSWER_CLOSE)]


def score_tree(tree: RolloutTree, verify: Verify | None = None) -> RolloutTree:
    """Set `correct` on every answer and `reward` on every sample, in place; returns the tree.

    `verify(answer_text, data_source, ground_truth) -> bool` defaults to `accuracy_reward`, i.e.
    the registered task's verifier on the whole turn-1 completion text. A verifier that raises on
    a completion marks it wrong instead of stopping training.
    """
    verify = verify or _task_verify
    tree.validate()
    spec = tree.spec
    for prompt in tree.prompts:
        for answer in prompt.answers:
            text = answer_part(answer.sample.text)
            try:
                correct = bool(verify(text, prompt.data_source, prompt.ground_truth))
            except UserError:  # a configuration error (unknown data_source), not model output
                raise
            except Exception:  # hostile model output must not kill a step
                correct = False
            answer.correct = correct
            answer.sample.reward = spec.score_answer(correct, answer.sample.text)
            for confidence in answer.confidences:
                confidence.reward = spec.score_confidence(correct, confidence.text)
    return tree
