"""The re-answer analysis: turn 2 answers the question again before it states a value.

A model cannot read its own answer distribution where it states its confidence (shared/notes:
a linear readout there ranks facts answers at chance while the answer's likelihood ranks them
at 0.98). Fresh answers written out in turn 2 put that distribution into text: the stated value
can then compare answers it sees with the one it judges, which carries to questions never
tuned on. The warm-up teaches the model to write them (`sft.analysis: reanswer`), the
confidence warm-up to read them (`calibrate.analysis: reanswer`), or the rollout writes them
from the prompt's other sampled answers (`reanswers_shown`), so that they are independent
draws, not copies of each other:

    <analysis>Again: <answer>Lizu</answer> <answer>Lizu</answer> <answer>Volir</answer></analysis>

Each re-answer sits in turn 1's answer tags, the tags the model answers after.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from calibrl.protocol.tags import ANALYSIS_CLOSE, ANALYSIS_OPEN, ANSWER_CLOSE, ANSWER_OPEN

REANSWER_PREFIX = "Again:"
NO_ANSWER = "?"  # a re-answer with nothing the task can extract
_ANSWER = re.compile(re.escape(ANSWER_OPEN) + r"(.*?)" + re.escape(ANSWER_CLOSE), re.S)


def reanswer_analysis(answers: Sequence[str | None]) -> str:
    """The analysis text of `answers` in order, `NO_ANSWER` for a missing or blank one, e.g.
    "Again: <answer>Lizu</answer> <answer>Volir</answer>"."""
    texts = [NO_ANSWER if a is None or not str(a).strip() else " ".join(str(a).split())
             for a in answers]
    return " ".join([REANSWER_PREFIX] + [f"{ANSWER_OPEN}{t}{ANSWER_CLOSE}" for t in texts])


def reanswers_in(analysis: str) -> list[str]:
    """The re-answers an analysis holds, stripped, in order; [] when it holds none."""
    return [m.strip() for m in _ANSWER.findall(analysis or "")]


def others_for_each(keys: Sequence[str | None], k: int) -> list[list[str | None]]:
    """Per answer `i` of a prompt's `n` answers (`keys`, what the task extracts from each), the
    `k` that follow it cyclically, `keys[i + 1] ... keys[i + k]` (mod n): never its own, each
    answer shown as often as any other. Needs n > k."""
    n = len(keys)
    if n <= k:
        raise ValueError(f"{k} other answers need more than {k} answers per prompt, got {n}")
    return [[keys[(i + j) % n] for j in range(1, k + 1)] for i in range(n)]


def reanswer_prefill(answers: Sequence[str | None]) -> str:
    """The start of a turn-2 reply whose analysis holds `answers`, as training writes it:
    "<analysis>Again: <answer>…</answer> …</analysis>\n"; the model goes on with its value."""
    return f"{ANALYSIS_OPEN}{reanswer_analysis(answers)}{ANALYSIS_CLOSE}\n"
