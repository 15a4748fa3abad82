"""The conversation texts of the modes, in one place (rollout, SFT and evaluation share them).

Each function turns a task's own messages (system + user question, `Task.make_prompt`) into the
messages one turn of a mode sends; `calibrl.protocol.modes` says which mode uses which:

- `plain_answer_messages`: turn 1 as the task poses it (RLVR, two-turn turn 1);
- `rlcr_answer_messages`: the same with `RLCR_INSTRUCTION` appended to the last user message, so
  one completion holds think, answer, analysis and confidence (single-turn RLCR);
- `confidence_messages`: turn 2 (two-turn), turn 1's messages, the sampled answer as the
  assistant reply, then the user message `CONFIDENCE_QUESTION` (configurable:
  `rollout.confidence_question`).
"""

from __future__ import annotations

from collections.abc import Sequence

from calibrl.protocol.tags import ANALYSIS_PAIR, CONFIDENCE_PAIR

CONFIDENCE_QUESTION = (
    "How confident are you that your answer above is correct? Briefly analyse it in "
    f"{ANALYSIS_PAIR} tags, then give a probability between 0 and 1 in "
    f"{CONFIDENCE_PAIR} tags."
)

RLCR_INSTRUCTION = (
    f" After the answer, briefly analyse how sure you are in {ANALYSIS_PAIR} tags and give "
    "the probability that your answer is correct, a number between 0 and 1, in "
    f"{CONFIDENCE_PAIR} tags."
)

Messages = list[dict[str, str]]


def plain_answer_messages(task_messages: Sequence[dict[str, str]]) -> Messages:
    """Turn-1 messages as the task wrote them (copies, so callers may edit them)."""
    return [dict(m) for m in task_messages]


def rlcr_answer_messages(task_messages: Sequence[dict[str, str]]) -> Messages:
    """Turn-1 messages with `RLCR_INSTRUCTION` appended to the last user message."""
    messages = plain_answer_messages(task_messages)
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
