"""SFT conversations built from solved problems: what the supervised warm-up teaches.

Four kinds: one per message format the RL modes use (the prompts are the modes' own,
`calibrl.protocol.modes`), and the faithfulness probe's:

- `answer` (rlvr and two_turn, turn 1): the task's messages, then the reference trace
  `<think>steps</think>\\n<answer>solution</answer>` (`Task.reference_trace`);
- `confidence` (two_turn, turn 2): turn 1 with a correct *or a wrong* trace (`Task.wrong_trace`)
  as the assistant reply, the confidence question, then
  `<analysis>...</analysis>\\n<confidence>c</confidence>`;
- `rlcr` (single-turn RLCR): the RLCR prompt, then the reference trace followed by the analysis
  and confidence;
- `early` (the faithfulness probe's format): turn 1 with the reference trace cut after some of
  its words and `EARLY_ANSWER_TEXT`, given as context; only the answer after it is trained.

Only the format is taught, never calibration: `c` comes from a fixed grid, drawn independently
of whether the answer in the context is right, and the analysis is either a neutral sentence of
the task's own drawn the same way (`Task.neutral_analyses`: Countdown's speak of arithmetic, a
question's of the question) or (`analysis="task"`) the task's factual examination of that
answer (`Task.analysis`), which states facts about the answer and never its verdict. Whatever
calibration the model ends up with is learned later (`calibrl calibrate`, RL), not copied here.
The loss is only ever on the last message (see `sft_batch`), so a wrong trace in a turn-2
context is read, never imitated.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from calibrl.data.example import TaskExample
from calibrl.protocol.completions import answer_part, chain_word_ends, early_answer_split
from calibrl.protocol.modes import RLCR, TWO_TURN
from calibrl.protocol.prompts import CONFIDENCE_QUESTION, confidence_messages
from calibrl.protocol.reanswer import reanswer_analysis
from calibrl.protocol.tags import ANALYSIS_CLOSE, ANALYSIS_OPEN, CONFIDENCE_CLOSE, CONFIDENCE_OPEN
from calibrl.settings.sft import CONFIDENCE_GRID, SFTMix
from calibrl.tasks import get_task

KINDS = ("answer", "confidence", "rlcr", "early")


@dataclass(frozen=True)
class SFTConversation:
    """One training conversation; the loss covers only its last (assistant) message.

    Attributes:
        messages: chat messages, the last one the assistant target.
        kind: one of `KINDS`.
        index: the problem's `TaskExample.index`.
        context_correct: for `confidence`, whether the answer in the context verifies; else None.
        confidence: the confidence in the target (`confidence`, `rlcr`), else None.
        reply_prefix: the leading part of the last message that is context, not trained
            (`early`: the cut trace and forced text), else "".
    """

    messages: list[dict[str, str]]
    kind: str
    index: int
    context_correct: bool | None = None
    confidence: float | None = None
    reply_prefix: str = ""


def confidence_text(analysis: str, confidence: float) -> str:
    """`<analysis>analysis</analysis>\\n<confidence>c</confidence>` (c without trailing zeros)."""
    return (f"{ANALYSIS_OPEN}{analysis}{ANALYSIS_CLOSE}\n"
            f"{CONFIDENCE_OPEN}{confidence:g}{CONFIDENCE_CLOSE}")


# --- conversations -----------------------------------------------------------------------------


def reference_trace(example: TaskExample, rng: random.Random | None = None,
                    failed_attempts: int = 0) -> str | None:
    """The correct trace of a problem from its reference solution, or None if it has none;
    `failed_attempts` as in `Task.reference_trace`."""
    return get_task(example.data_source).reference_trace(example, rng, failed_attempts)


def draw_failed_attempts(rng: random.Random, p: float, cap: int) -> int:
    """How many failed attempts precede a trace's final one: each further one with
    probability `p` (geometric), at most `cap`."""
    n = 0
    while n < cap and p > 0 and rng.random() < p:
        n += 1
    return n


def answer_conversation(example: TaskExample, trace: str) -> SFTConversation:
    """Format (a): turn-1 messages + the trace."""
    messages = TWO_TURN.answer_prompt(example.messages)
    return SFTConversation(messages + [{"role": "assistant", "content": trace}], "answer",
                           example.index)


def early_answer_conversation(example: TaskExample, trace: str,
                              rng: random.Random) -> SFTConversation | None:
    """Format (d): turn-1 messages + the trace cut after k of its n words (k uniform in
    [0, n)) and answered at once; None if the trace is not laid out as `answer_trace` writes
    it. Cuts fall inside steps too, as the probe's fraction points do."""
    ends = chain_word_ends(trace)
    if not ends:
        return None
    context, target = early_answer_split(trace, rng.randrange(len(ends)))
    messages = TWO_TURN.answer_prompt(example.messages)
    return SFTConversation(messages + [{"role": "assistant", "content": context + target}],
                           "early", example.index, reply_prefix=context)


def confidence_conversation(example: TaskExample, context_trace: str, context_correct: bool,
                            confidence: float, analysis: str,
                            question: str = CONFIDENCE_QUESTION) -> SFTConversation:
    """Format (b): turn 1 answered with `context_trace`, the question, analysis + confidence."""
    messages = confidence_messages(example.messages, context_trace, question)
    target = {"role": "assistant", "content": confidence_text(analysis, confidence)}
    return SFTConversation(messages + [target], "confidence", example.index, context_correct,
                           confidence)


def rlcr_conversation(example: TaskExample, trace: str, confidence: float,
                      analysis: str) -> SFTConversation:
    """Format (c): the RLCR prompt + trace, analysis and confidence in one message."""
    messages = RLCR.answer_prompt(example.messages)
    content = trace + "\n" + confidence_text(analysis, confidence)
    return SFTConversation(messages + [{"role": "assistant", "content": content}], "rlcr",
                           example.index, None, confidence)


def decoy_trace(example: TaskExample, examples: Sequence[TaskExample], rng: random.Random,
                tries: int = 8) -> str | None:
    """The reference trace of another problem of `examples` whose answer `example`'s task does
    not accept (a real answer to another question: it does not look made up), or None."""
    task = get_task(example.data_source)
    for _ in range(tries):
        other = examples[rng.randrange(len(examples))]
        trace = reference_trace(other, rng) if other.index != example.index else None
        if trace is not None and not task.verify(answer_part(trace), example.ground_truth):
            return trace
    return None


def build_conversations(examples: Iterable[TaskExample], mix: SFTMix, rng: random.Random,
                        grid: Sequence[float] = CONFIDENCE_GRID,
                        analyses: Sequence[str] | None = None,
                        question: str = CONFIDENCE_QUESTION, failed_attempt_p: float = 0.0,
                        max_failed_attempts: int = 0, analysis: str = "neutral",
                        reanswers: int = 3) -> list[SFTConversation]:
    """One conversation per problem with a reference solution, of a kind drawn by `mix`.

    Problems without a solution are skipped. Every turn-1 trace, right or wrong, starts with
    `draw_failed_attempts(rng, failed_attempt_p, max_failed_attempts)` failed attempts where
    the task can show them. A turn-2 context is wrong with probability `mix.wrong_share`
    (falling back to the correct trace if no corruption fails the verifier); confidence and
    analysis are drawn after, and independently of, that choice; with `analysis="task"` the
    analysis is the task's examination of the answer in the context instead (the same draws
    are made, so the rest of the data is unchanged). With `analysis="reanswer"` the analysis
    answers the question again, `reanswers` times, with the reference answer
    (`calibrl.protocol.reanswer`), and a task without wrong traces gets another problem's
    trace as its wrong context (`decoy_trace`): re-answers that differ from the answer in the
    context teach recalling the answer, not copying it.
    """
    examples = list(examples)
    out = []
    for example in examples:
        failed = draw_failed_attempts(rng, failed_attempt_p, max_failed_attempts)
        trace = reference_trace(example, rng, failed)
        if trace is None:
            continue
        kind = rng.choices(KINDS, weights=mix.weights)[0]
        if kind == "answer":
            out.append(answer_conversation(example, trace))
            continue
        if kind == "early":
            early = early_answer_conversation(example, trace, rng)
            out.append(early if early is not None else answer_conversation(example, trace))
            continue
        task = get_task(example.data_source)
        context, correct = trace, True
        if kind == "confidence" and rng.random() < mix.wrong_share:
            wrong = task.wrong_trace(example, rng, failed)
            if wrong is None and analysis == "reanswer":
                wrong = decoy_trace(example, examples, rng)
            if wrong is not None:
                context, correct = wrong, False
        pool = analyses or task.neutral_analyses
        confidence, text = rng.choice(grid), rng.choice(pool)
        if analysis == "task":
            examined = context if kind == "confidence" else trace
            task_text = task.analysis(examined, example.ground_truth)
            text = task_text if task_text is not None else text
        elif analysis == "reanswer":
            text = reanswer_analysis([task.extract_answer(answer_part(trace))] * reanswers)
        if kind == "confidence":
            out.append(confidence_conversation(example, context, correct, confidence, text,
                                               question))
        else:
            out.append(rlcr_conversation(example, trace, confidence, text))
    return out


# --- held-out exclusion ------------------------------------------------------------------------


def problem_key(example: TaskExample) -> Hashable:
    """Equal keys are the same problem of the same task (`Task.problem_key`)."""
    task = get_task(example.data_source)
    return task.name, task.problem_key(example.ground_truth)


def exclude_problems(train: Sequence[TaskExample],
                     held_out: Iterable[TaskExample]) -> tuple[list[TaskExample], int]:
    """`train` without any problem that also occurs in `held_out`, and how many were dropped."""
    banned = {problem_key(ex) for ex in held_out}
    kept = [ex for ex in train if problem_key(ex) not in banned]
    return kept, len(train) - len(kept)
