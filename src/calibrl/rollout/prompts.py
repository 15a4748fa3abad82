"""The conversation texts of each mode, in one place (rollout, SFT and evaluation share them).

- turn 1 (all modes): the task's own messages (system + user question);
- single-turn RLCR: the same, with `RLCR_INSTRUCTION` appended to the last user message, so one
  completion holds think, answer, analysis and confidence;
- turn 2 (two_turn): turn 1's messages, the sampled answer as the assistant reply, then the user
  message `CONFIDENCE_QUESTION` (configurable: `rollout.confidence_question`).
"""

from __future__ import annotations

from collections.abc import Sequence

# The texts live one floor down (the tokenizer corpus needs them too); re-exported here.
from calibrl.protocol.prompts import CONFIDENCE_QUESTION, RLCR_INSTRUCTION

Messages = list[dict[str, str]]


def answer_messages(task_messages: Sequence[dict[str, str]], mode: str) -> Messages:
    """Turn-1 messages for `mode` ('two_turn', 'rlvr' or 'rlcr')."""
    messages = [dict(m) for m in task_messages]
    if mode == "rlcr":
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        messages[last_user]["content"] += RLCR_INSTRUCTION
    return messages


def confidence_messages(task_messages: Sequence[dict[str, str]], answer_text: str,
                        question: str = CONFIDENCE_QUESTION) -> Messages:
    """Turn-2 messages: the question, the model's answer as the assistant reply, then `question`."""
    return [dict(m) for m in task_messages] + [
        {"role": "assistant", "content": answer_text},
        {"role": "user", "content": question},
    ]
