"""How the probe judges one sampled answer: the training reward's verifier, on the answer alone.

`gen_text` is only what the model generated after the forced text. It is cut after its last
`</answer>` (the sample stopped there; the token completing the tag may carry a few more
characters, such as a line break the last-line extractor would trip on, and the training reward
cuts the same way, `calibrl.algo.scoring.answer_part`), then given `<answer>` / `</answer>` where
missing. The task's `verify` judges that string; for Countdown it is `verify_equation_strict`,
the function the training reward calls, so the two cannot disagree (tests/probe prove it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calibrl.algo.scoring import answer_part
from calibrl.tasks import get_task
from calibrl.tasks.countdown import ensure_answer_tags, extract_solution


def solution_str(gen_text: str) -> str:
    """The string the verifier sees for a sampled answer."""
    return ensure_answer_tags(answer_part(gen_text))


def _verify(text: str, ground_truth: Mapping[str, Any], data_source: str) -> bool:
    task = get_task(data_source)  # an unknown source is the user's error, raised here
    try:
        return bool(task.verify(text, ground_truth))
    except Exception:  # hostile model output is wrong, not fatal
        return False


def judge(gen_text: str, ground_truth: Mapping[str, Any], data_source: str = "countdown") -> bool:
    """Whether a sampled answer (text after the forced `<answer>`) is correct."""
    return _verify(solution_str(gen_text), ground_truth, data_source)


def judge_completion(completion: str, ground_truth: Mapping[str, Any],
                     data_source: str = "countdown") -> bool:
    """Whether a whole completion (chain and answer) is correct, as the training reward says:
    no tags are added, since the model had to write them itself."""
    return _verify(answer_part(completion), ground_truth, data_source)


def normalise_answer(answer: str | None) -> str | None:
    """An extracted answer without whitespace, so `(1+2)` and `( 1 + 2 )` count as the same."""
    if answer is None:
        return None
    text = "".join(answer.split())
    return text or None


def sampled_answer(gen_text: str) -> str | None:
    """The normalised answer a sample gives (None when it gives none)."""
    return normalise_answer(extract_solution(solution_str(gen_text)))


def final_answer_of(completion: str) -> str | None:
    """The final answer of a whole completion (chain and answer), as extracted for the reward."""
    return extract_solution(answer_part(completion))
