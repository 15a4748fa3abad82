"""The text the tiny tokenizer is fitted to: everything calibrl itself writes into a conversation.

The tokenizer's BPE merges are learned from this corpus until no pair is left, so every word,
number and operator group that occurs here ends up as one token; anything else still encodes
(byte-level fallback), only in more pieces. Changing this text changes the vocabulary, which is
why a saved model always carries its own tokenizer.
"""

from __future__ import annotations

import operator
import random

from calibrl.protocol.prompts import CONFIDENCE_QUESTION, RLCR_INSTRUCTION
from calibrl.protocol.tags import (
    ANALYSIS_CLOSE,
    ANALYSIS_OPEN,
    ANALYSIS_PAIR,
    ANSWER_CLOSE,
    ANSWER_OPEN,
    CONFIDENCE_CLOSE,
    CONFIDENCE_OPEN,
    CONFIDENCE_PAIR,
    THINK_CLOSE,
    THINK_OPEN,
)
from calibrl.tasks import DEFAULT_TASK, get_task

# Turn-2 questions of the two-turn calibration conversation; the first is the default
# (`calibrl.protocol.prompts.CONFIDENCE_QUESTION`, the run config's `rollout.confidence_question`).
CONFIDENCE_QUESTIONS = (
    CONFIDENCE_QUESTION,
    "Now state how confident you are that your answer above is correct. Reply with "
    f"{ANALYSIS_PAIR} and {CONFIDENCE_PAIR} tags, the confidence a number "
    "between 0 and 1.",
    "How confident are you that your answer is correct? Give a short analysis in "
    f"{ANALYSIS_PAIR} tags and your confidence, a number between 0 and 1, in "
    f"{CONFIDENCE_PAIR} tags.",
    "Rate your confidence that the equation above reaches the target. Put your reasoning in "
    f"{ANALYSIS_PAIR} tags and a probability from 0 to 1 in {CONFIDENCE_PAIR} "
    "tags.",
    "What is the probability that your previous answer is right? Explain briefly inside "
    f"{ANALYSIS_PAIR} and give a number between 0 and 1 inside "
    f"{CONFIDENCE_PAIR}.",
)

ANALYSIS_SENTENCES = (
    "The equation uses each number exactly once and evaluates to the target.",
    "I checked every step of the arithmetic and the result equals the target.",
    "I did not reach the target, so the answer is probably wrong.",
    "The result is close to the target but not equal to it.",
    "I am not sure the arithmetic is right.",
    "The answer uses a number more than once.",
    "The answer does not use all of the numbers.",
    "I could not find a solution, so my answer is a guess.",
    "The answer is missing or not a valid equation.",
    "This looks correct, but a division may not be exact.",
    "My reasoning found the target, so I am fairly confident.",
    "There was a mistake in one of the steps.",
)

THINK_PHRASES = (
    "Let me try",
    "We need to reach",
    "That works.",
    "That does not work.",
    "Too big.",
    "Too small.",
    "Try another order.",
    "So the answer is",
)

ROLES = ("system", "user", "assistant")

# Plain words an analysis or reasoning line is likely to use; each enters the vocabulary whole.
EXTRA_WORDS = (
    "a about above after again all also an and answer any are as at be because before below "
    "but by can check checked close confidence confident correct could did different divide "
    "divided do does done each else equal equals equation error exact exactly false find first "
    "for found from get give given good guess has have here how I if in is it its just last "
    "left less likely low high maybe minus more most much must my need no not now number "
    "numbers of off on once one only or order other over plus possible previous probability "
    "probably product reach result right same second should since so some step steps still "
    "sum sure target than that the then there these this three times to too true try two "
    "uncertain unlikely use used uses using valid value very was we wrong yes you your"
).split()


def _digit_strings() -> list[str]:
    """Every digit string of length 1..3, leading zeros included (1110 strings).

    The pre-tokenizer cuts digit runs into pieces of at most three, so with all of these in
    the vocabulary every such piece is one token (and decimals such as 0.05 stay short).
    """
    out = [str(d) for d in range(10)]
    out += [f"{n:02d}" for n in range(100)]
    out += [f"{n:03d}" for n in range(1000)]
    return out


def _equation_lines(rng: random.Random, count: int) -> list[str]:
    """Think traces and answers in the shape the SFT data and the policy write them."""
    ops = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
    lines = []
    for _ in range(count):
        a, b, c = (rng.randint(1, 99) for _ in range(3))
        o1, o2 = rng.choice(list(ops)), rng.choice(list(ops))
        ab = ops[o1](a, b)
        ab_text = str(int(ab)) if float(ab).is_integer() else f"{ab:.2f}"
        lines.append(
            f"{THINK_OPEN}\n{rng.choice(THINK_PHRASES)} {a} {o1} {b} = {ab_text}\n"
            f"{ab_text} {o2} {c}\n{THINK_CLOSE}\n{ANSWER_OPEN}({a} {o1} {b}) {o2} {c}{ANSWER_CLOSE}"
        )
    return lines


def _confidence_values() -> list[str]:
    values = [f"{k / 100:.2f}" for k in range(0, 101, 5)] + [f"{k / 10:.1f}" for k in range(11)]
    return values + ["0", "1"]


def tokenizer_corpus(seed: int = 0, task: str = DEFAULT_TASK) -> list[str]:
    """Deterministic list of texts the BPE merges are learned from; `task` names the task
    whose prompts (`Task.corpus_texts`) it holds, the rest is the same for every task."""
    rng = random.Random(seed)
    texts: list[str] = list(_digit_strings())
    texts += [f"{role}\n" for role in ROLES]  # ChatML role lines
    texts += [f"{role.capitalize()}: " for role in ROLES]  # the plain "User: ..." format
    texts += get_task(task).corpus_texts(rng)  # the task's prompts, in every style
    texts += _equation_lines(rng, 50)
    texts += CONFIDENCE_QUESTIONS
    texts.append(RLCR_INSTRUCTION)
    for sentence in ANALYSIS_SENTENCES:
        for value in _confidence_values():
            texts.append(
                f"{ANALYSIS_OPEN}{sentence}{ANALYSIS_CLOSE}\n{CONFIDENCE_OPEN}{value}"
                f"{CONFIDENCE_CLOSE}"
            )
    texts += [" " + word for word in EXTRA_WORDS]
    texts += [word.capitalize() for word in EXTRA_WORDS]
    texts += ["\n\n", "  "]
    return texts
