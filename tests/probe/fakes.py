"""A scripted engine for probe tests: completions are a known function of the decoded prompt.

Trace prompts (the task's question) get the solver's chain and answer; probe prompts (ending in
the forced text) get whatever `answer(context_text, numbers, target)` says, for every sample.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from calibrl.rollout.engine import Generation, SamplingParams
from calibrl.rollout.stopping import decode
from calibrl.settings.probe import FORCED_TEXT
from calibrl.tasks.countdown.solver import solve

_QUESTION = re.compile(r"Using the numbers \[([\d, ]+)\], create an equation that equals (\d+)")

Answer = Callable[[str, list[int], int], str]


def problem_of(text: str) -> tuple[list[int], int]:
    match = _QUESTION.search(text)
    assert match is not None, text
    return [int(n) for n in match.group(1).split(",")], int(match.group(2))


def solved_trace(numbers: Sequence[int], target: int) -> str:
    """The completion the scripted model writes: the solver's steps, then its equation."""
    solution = solve(numbers, target)
    assert solution is not None
    return ("<think>\n" + "\n".join(solution.steps) + "\n</think>\n<answer>"
            + solution.expression + "</answer>")


def always_right(context: str, numbers: list[int], target: int) -> str:
    return solve(numbers, target).expression + "</answer>"


def right_after_last_step(context: str, numbers: list[int], target: int) -> str:
    """Right only once the chain's last step is whole in the context."""
    last_step = solve(numbers, target).steps[-1]
    thought = context.rpartition("<think>")[2]
    if thought.endswith(FORCED_TEXT) and last_step in thought:
        return always_right(context, numbers, target)
    return " + ".join(str(n) for n in numbers) + " + 1</answer>"


class ScriptedEngine:
    """An `Engine` whose answers are scripted; records every prompt it was given."""

    def __init__(self, tokenizer, answer: Answer, trace: Callable[[list[int], int], str]
                 = solved_trace) -> None:
        self.tokenizer = tokenizer
        self.answer = answer
        self.trace = trace
        self.calls: list[tuple[int, SamplingParams]] = []

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams
                 ) -> list[list[Generation]]:
        self.calls.append((len(prompts), params))
        out = []
        for prompt in prompts:
            text = self.tokenizer.decode(list(prompt), skip_special_tokens=False)
            numbers, target = problem_of(text)
            if text.endswith(FORCED_TEXT):
                completion = self.answer(text, numbers, target)
            else:
                completion = self.trace(numbers, target)
            ids = self.tokenizer(completion, add_special_tokens=False)["input_ids"]
            gen = Generation(ids, decode(self.tokenizer, ids), [0.0] * len(ids), "stop")
            out.append([gen] * params.n)
        return out

    def update_weights(self, model) -> None:
        pass
