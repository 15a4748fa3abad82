"""A few sample conversations of a rollout, as table rows for the logs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from calibrl.algo.rollout_tree import RolloutTree
from calibrl.data import TaskExample
from calibrl.rewards import parse_confidence


def sample_rows(tree: RolloutTree, examples: Sequence[TaskExample], count: int
                ) -> list[dict[str, Any]]:
    """The first answer (and its first confidence) of the first `count` prompts."""
    rows = []
    for prompt, example in zip(tree.prompts[:count], examples, strict=False):
        if not prompt.answers:
            continue
        answer = prompt.answers[0]
        confidence_text = answer.confidences[0].text if answer.confidences else ""
        rows.append({
            "question": example.messages[-1]["content"],
            "answer": answer.sample.text,
            "correct": bool(answer.correct),
            "confidence_text": confidence_text,
            "confidence": parse_confidence(confidence_text or answer.sample.text),
            "answer_reward": answer.sample.reward,
            "confidence_reward": answer.confidences[0].reward if answer.confidences else None,
        })
    return rows
