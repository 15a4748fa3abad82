"""How the probe judges one sampled answer: the training reward's verifier, on the answer alone.

`gen_text` is only what the model generated after the forced text. It is cut after its last
`</answer>` (the sample stopped there; the token completing the tag may carry a few more
characters, such as a line break the last-line extractor would trip on, and the training reward
cuts the same way, `calibrl.protocol.completions.answer_part`), then given `<answer>` /
`</answer>` where missing. The task's `verify` judges that string, the very call the training
reward makes, so the two cannot disagree (tests/probe prove it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calibrl.protocol.completions import answer_part, ensure_answer_tags
from calibrl.tasks import DEFAULT_TASK, get_task


def solution_str(gen_text: str) -> str:
    """The string the verifier sees for a sampled answer."""
    return ensure_answer_tags(answer_part(gen_text))


def judge(gen_text: str, ground_truth: Mapping[str, Any], data_source: str = DEFAULT_TASK) -> bool:
    """Whether a sampled answer (text after the forced `<answer>`) is correct."""
    return get_task(data_source).verify(solution_str(gen_text), ground_truth)


def judge_completion(completion: str, ground_truth: Mapping[str, Any],
                     data_source: str = DEFAULT_TASK) -> bool:
    """Whether a whole completion (chain and answer) is correct, as the training reward says:
    no tags are added, since the model had to write them itself."""
    return get_task(data_source).verify(answer_part(completion), ground_truth)


def normalise_answer(answer: str | None) -> str | None:
    """An extracted answer without whitespace, so `(1+2)` and `( 1 + 2 )` count as the same."""
    if answer is None:
        return None
    text = "".join(answer.split())
    return text or None


def sampled_answer(gen_text: str, data_source: str = DEFAULT_TASK) -> str | None:
    """The normalised answer a sample gives (None when it gives none)."""
    return normalise_answer(get_task(data_source).extract_answer(solution_str(gen_text)))


def final_answer_of(completion: str, data_source: str = DEFAULT_TASK) -> str | None:
    """The final answer of a whole completion (chain and answer), as extracted for the reward."""
    return get_task(data_source).extract_answer(answer_part(completion))
