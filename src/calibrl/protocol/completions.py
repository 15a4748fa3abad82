"""How a completion is laid out in the format tags: building one, and cutting out its answer.

Task-independent: a task decides what goes *inside* `<answer>` (`Task.extract_answer`,
`Task.verify`); these functions only place and find the tags.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, THINK_OPEN

# Where the model's reply starts in a decoded prompt+response string: the plain "User: ...
# Assistant:" format, then ChatML's assistant turn (a reward manager decodes special tokens).
CHATML_ASSISTANT = "<|im_start|>assistant"
RESPONSE_MARKERS = ("Assistant:", CHATML_ASSISTANT)


def response_part(solution_str: str) -> str:
    """What follows the first response marker of a decoded prompt+response string (the first
    marker of `RESPONSE_MARKERS` that occurs wins), or the whole string if none occurs.

    So a prompt that names the answer tags ("... in <answer> </answer> tags") is never read as
    the model's answer. calibrl's reward manager decodes prompt and response as one string
    (TinyZero's convention); verl passes the response alone, which has no marker and is
    returned whole.
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


# Appended to a cut chain to ask for the answer at once: the probe's forced text, and the end of
# the context of the warm-up's early answers, so the probe asks in a format the model was taught.
EARLY_ANSWER_TEXT = f"\n{THINK_CLOSE}\n{ANSWER_OPEN}"


def trace_parts(trace: str) -> tuple[list[str], str] | None:
    """`(steps, answer)` of a trace laid out as `answer_trace` writes it, else None."""
    head, tail = f"{THINK_OPEN}\n", f"\n{THINK_CLOSE}\n{ANSWER_OPEN}"
    if not trace.startswith(head) or not trace.endswith(ANSWER_CLOSE):
        return None
    body, found, answer = trace[len(head):-len(ANSWER_CLOSE)].rpartition(tail)
    return (body.split("\n"), answer) if found else None


def _word_ends(text: str) -> list[int]:
    return [m.end() for m in re.finditer(r"\S+", text)]


def chain_word_ends(trace: str) -> list[int] | None:
    """Where each word of an `answer_trace`'s steps ends, as offsets into the steps' text
    (the steps joined by line breaks); None if `trace` is not laid out so."""
    parts = trace_parts(trace)
    return None if parts is None else _word_ends("\n".join(parts[0]))


def early_answer_split(trace: str, keep: int) -> tuple[str, str] | None:
    """An `answer_trace` cut after the first `keep` words of its steps and answered at once.

    Returns `(context, target)`: context = `<think>`, then (if `keep` > 0) a line break and the
    steps' text through word `keep`, then `EARLY_ANSWER_TEXT`; target = the answer and
    `</answer>`. Like the probe's cuts, a cut keeps a word but not the whitespace after it.
    `keep` = all the words gives the trace itself (context + target == trace). None if `trace`
    is not laid out as `answer_trace` writes it or `keep` is outside [0, number of words].
    """
    parts = trace_parts(trace)
    if parts is None:
        return None
    body, answer = "\n".join(parts[0]), parts[1]
    ends = _word_ends(body)
    if not 0 <= keep <= len(ends):
        return None
    kept = "\n" + body[:ends[keep - 1]] if keep else ""
    return THINK_OPEN + kept + EARLY_ANSWER_TEXT, answer + ANSWER_CLOSE


def last_answer(text: str) -> str | None:
    """The stripped content of the last complete `<answer>…</answer>` block, or None."""
    end = text.rfind(ANSWER_CLOSE)
    start = text.rfind(ANSWER_OPEN, 0, end) if end != -1 else -1
    return None if start == -1 else text[start + len(ANSWER_OPEN):end].strip()
