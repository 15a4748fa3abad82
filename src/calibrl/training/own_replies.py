"""A format warm-up that teaches no fact: the model's own replies rewritten into answer tags.

A pretrained chat model asked "What is the capital of Peru?" replies in a sentence ("The capital
of Peru is Lima.") and ignores the answer tags the task's prompt asks for. Its own reply, read
by name against the values the training questions ask about (`short_answer.replies`), becomes
the answer of an SFT row: `<answer>Lima</answer>` for the same question in the task's prompt.
Right or wrong, the answer is what the model already said, so `calibrl sft` on these rows
teaches the format (and, with its `confidence` share, the turn-2 format) and not the facts;
only training questions are asked, so nothing of the test split is seen either. With
`think`, the reply cut after the value it names ("The capital of Peru is Lima") is kept as the
think step before the answer: the answer is then a name copied from the model's own sentence, a
habit that does not depend on which kinds of question the rows ask.

Shapes: N questions; each gets one reply.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from typing import Any

from calibrl.data.example import TaskExample
from calibrl.rollout.engine import SamplingParams
from calibrl.rollout.rollouts import encode_messages
from calibrl.tasks.short_answer.normalize import exact_match
from calibrl.tasks.short_answer.replies import vocabularies

KIND_KEY = "fact_type"  # the key of `TaskExample.extra` whose values share a vocabulary


def question_messages(example: TaskExample) -> list[dict[str, str]]:
    """The question alone, as a user would ask it: no format instruction to ignore."""
    return [{"role": "user", "content": example.ground_truth["question"]}]


def rewrite_replies(examples: Sequence[TaskExample], replies: Sequence[str],
                    known: Sequence[TaskExample] = (), think: bool = False
                    ) -> tuple[list[TaskExample], Counter]:
    """Each example whose reply names a value of its kind (`extra["fact_type"]`; one
    vocabulary from the accepted answers of the examples and of `known`, e.g. the rest of the
    training split) as an SFT row answering that value, with the reply kept as
    `extra["own_reply"]` (and with `think`, cut after the value, as its one reasoning step,
    `extra["steps"]`); and the counts of replies that named the right value, a wrong one, or
    none (those rows are left out)."""
    vocab = vocabularies((str(e.extra.get(KIND_KEY, "")), e.ground_truth["answers"])
                         for e in (*examples, *known))
    rows, counts = [], Counter()
    for example, reply in zip(examples, replies, strict=True):
        kind = str(example.extra.get(KIND_KEY, ""))
        value = vocab[kind].named_value(reply)
        if value is None:
            counts["named none"] += 1
            continue
        counts["named right" if exact_match(value, example.ground_truth["answers"])
               else "named wrong"] += 1
        truth = {**example.ground_truth, "answers": [value]}
        extra = {**example.extra, "solution": value, "own_reply": reply}
        if think:
            extra["steps"] = [said_sentence(vocab[kind].named_prefix(reply))]
        rows.append(dataclasses.replace(example, ground_truth=truth, extra=extra))
    return rows, counts


def said_sentence(prefix: str) -> str:
    """A reply cut after its value, as one line ending a sentence."""
    line = " ".join(prefix.split())
    return line if line.endswith((".", "!", "?")) else line + "."


def own_reply_rows(engine: Any, tokenizer: Any, examples: Sequence[TaskExample], *,
                   known: Sequence[TaskExample] = (), max_new_tokens: int = 32,
                   temperature: float = 0.0, seed: int = 0, chat_template: str = "auto",
                   think: bool = False) -> tuple[list[TaskExample], Counter]:
    """The model's reply to each question (`question_messages`; greedy by default: its
    best-known answer), rewritten by `rewrite_replies` (with `known`'s answers too)."""
    prompts = [encode_messages(tokenizer, question_messages(e), chat_template) for e in examples]
    params = SamplingParams(n=1, temperature=temperature, max_new_tokens=max_new_tokens,
                            seed=seed)
    replies = [gens[0].text for gens in engine.generate(prompts, params)]
    return rewrite_replies(examples, replies, known, think)
