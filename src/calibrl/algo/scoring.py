"""Write rewards into a rollout tree, per its mode.

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
from functools import partial
from typing import Any

from calibrl.algo.rollout_tree import RolloutTree
from calibrl.protocol.completions import answer_part
from calibrl.tasks import get_task, safe_verify

Verify = Callable[[str, str, Mapping[str, Any]], bool]
Check = Callable[[str, Mapping[str, Any]], bool]


def _verifier(data_source: str, verify: Verify | None) -> Check:
    """`(answer_text, ground_truth) -> bool` for a prompt, never raising on model output: the
    registered task's `verify`, or `verify` under the same guard (`safe_verify`). An unknown
    `data_source` is a configuration error and raises `UserError` here."""
    if verify is None:
        return get_task(data_source).verify

    def check(text: str, ground_truth: Mapping[str, Any]) -> bool:
        return verify(text, data_source, ground_truth)

    return partial(safe_verify, check)


def score_tree(tree: RolloutTree, verify: Verify | None = None) -> RolloutTree:
    """Set `correct` on every answer and `reward` on every sample, in place; returns the tree.

    `verify(answer_text, data_source, ground_truth) -> bool` defaults to the registered task's
    `Task.verify`, given the completion's `answer_part`. A verifier that raises on a completion
    (or runs too long) marks it wrong instead of stopping training.
    """
    tree.validate()
    spec = tree.spec
    for prompt in tree.prompts:
        check = _verifier(prompt.data_source, verify)
        for answer in prompt.answers:
            correct = check(answer_part(answer.sample.text), prompt.ground_truth)
            answer.correct = correct
            answer.sample.reward = spec.score_answer(correct, answer.sample.text)
            for confidence in answer.confidences:
                confidence.reward = spec.score_confidence(correct, confidence.text)
    return tree
