"""How a completion is laid out in the format tags: building one, and cutting out its answer.

Task-independent: a task decides what goes *inside* `<answer>` (`Task.extract_answer`,
`Task.verify`); these functions only place and find the tags.
"""

from __future__ import annotations

from collections.abc import Sequence

from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, THINK_OPEN

# Where the model's reply starts in a decoded prompt+response string: the plain "User: ...
# Assistant:" format, then ChatML's assistant turn (a reward manager decodes special tokens).
RESPONSE_MARKERS = ("Assistant:", "<|im_start|>assistant")


def response_part(solution_str: str) -> str:
    """What follows the first response marker of a decoded prompt+response string (the first
    marker of `RESPONSE_MARKERS` that occurs wins), or the whole string if none occurs.

    So a prompt that names the answer tags ("... in <answer> </answer> tags") is never read as
    the model's answer. verl's reward functions receive prompt and response as one string.
    """
    for marker in RESPONSE_MARKERS:
        head, found, tail = solution_str.partition(marker)
        if found:
            return tail
    return solution_str


def answer_part(text: str) -> str:
    """`text` up to the end of its last `</answer>`, or all of it if there is none.

    What a verifier sees of a completion: whatever follows the answer (RLCR's analysis and
    confidence, or a stray newline) is not part of it.
    """
    end = text.rfind(ANSWER_CLOSE)
    return text if end == -1 else text[: end + len(ANSWER_CLOSE)]


def ensure_answer_tags(gen_text: str) -> str:
    """Add `<answer>` / `</answer>` where missing, so an answer-only completion can be verified.

    The probe forces `...</think>\\n<answer>` and stops at `</answer>`, so the sampled text
    usually lacks the opening tag and sometimes (length cut) the closing one.
    """
    text = gen_text
    if ANSWER_OPEN not in text:
        text = ANSWER_OPEN + text
    if ANSWER_CLOSE not in text.rpartition(ANSWER_OPEN)[2]:
        text = text + ANSWER_CLOSE
    return text


def answer_trace(steps: Sequence[str], answer: str) -> str:
    """A turn-1 completion: the steps inside think tags, one per line, then the answer tags."""
    return (f"{THINK_OPEN}\n" + "\n".join(steps)
            + f"\n{THINK_CLOSE}\n{ANSWER_OPEN}{answer}{ANSWER_CLOSE}")


def last_answer(text: str) -> str | None:
    """The stripped content of the last complete `<answer>…</answer>` block, or None."""
    end = text.rfind(ANSWER_CLOSE)
    start = text.rfind(ANSWER_OPEN, 0, end) if end != -1 else -1
    return None if start == -1 else text[start + len(ANSWER_OPEN):end].strip()
