"""The confidence warm-up's data: the model's own answers to training prompts, graded by the
task's verifier, each with the turn-2 reply the model will be trained to write about it.

For every prompt the model samples `answers_per_prompt` answers (turn 1 of the two-turn mode)
and, for each, one turn-2 reply of its own. The trained reply keeps the model's own analysis
(the text it writes at inference, so training and sampling see the same context) and states the
target value: `<analysis>own analysis</analysis>\\n<confidence>0.d</confidence>`. The value is
written as one token after "0." (`ValueTokens`); which digit the reply shows matters only as
context for the closing tag, the loss on it is the scoring loss on the whole distribution.
The model reads only the conversation: no grade, no hint is in the context.

With `analysis="reanswer"` the analysis is instead the question answered again, fresh: the
answers of the prompt's other samples (`calibrl.protocol.reanswer`), which the model writes at
inference by sampling them itself, or which the rollout writes for it from the prompt's other
sampled answers (`eval.reanswers_shown`, `rollout.reanswers_shown`: then they are independent
draws at inference too), so its value can compare answers it sees. The answer
warm-up teaches writing them by recall (`sft.analysis: reanswer`); the cross-entropy here on
the re-answers (`format_weight`) teaches that they are drawn independently, as the other
samples are (left untrained, the turn-2 text drifted: 26 % unparsable in the facts demo).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from calibrl.algo import score_tree
from calibrl.algo.confidence_loss import nearest_value_index
from calibrl.algo.readout import last_states, out_of_fold_readout, state_sequences
from calibrl.algo.self_estimates import (
    agreement,
    answer_likelihood,
    cluster_folds,
    held_out_binned_targets,
    mapped_targets,
)
from calibrl.algo.stated_value import VALUE_PREFIX, ValueTokens
from calibrl.data.example import TaskExample
from calibrl.errors import UserError
from calibrl.protocol.modes import TWO_TURN
from calibrl.protocol.prompts import confidence_messages
from calibrl.protocol.reanswer import others_for_each, reanswer_analysis
from calibrl.protocol.tags import ANALYSIS_CLOSE, ANALYSIS_OPEN, CONFIDENCE_CLOSE, CONFIDENCE_OPEN
from calibrl.rollout.rollouts import (
    RolloutSettings,
    answer_keys,
    sample_answers,
    sample_confidences,
)
from calibrl.settings.calibrate import CalibrateSection
from calibrl.tasks import get_task
from calibrl.training.sft_batch import IGNORE, TokenizedConversation, tokenize_conversation

_ANALYSIS = re.compile(re.escape(ANALYSIS_OPEN) + r"(.*?)" + re.escape(ANALYSIS_CLOSE), re.S)


@dataclass(frozen=True)
class GradedAnswer:
    """One sampled answer, its grade, the model's own turn-2 analysis and the target."""

    index: int  # the problem's TaskExample.index
    group: str  # the task's difficulty label
    answer: str
    correct: bool
    analysis: str
    target: float
    agreement: float = 0.0  # share of the prompt's other answers that give the same answer
    likelihood: float = 0.0  # exp(mean token log-prob) of the answer when sampled (0: none)
    cluster: str = ""  # Task.readout_cluster: what held-out targets keep in one fold
    readout: float = 0.0  # the out-of-fold probe of the state at <confidence> (target=readout)


@dataclass(frozen=True)
class ConfidenceRow:
    """A turn-2 conversation to train: CE labels on the reply except the value token, which
    is at `value_pos` (the position whose logits predict it is `value_pos - 1`)."""

    input_ids: list[int]
    labels: list[int]
    value_pos: int
    target: float


def own_analysis(text: str) -> str:
    """The first analysis the model wrote in a turn-2 sample, stripped; "" when it wrote none."""
    match = _ANALYSIS.search(text or "")
    return match.group(1).strip() if match else ""


def _analyses(config: CalibrateSection, keys: Sequence[str | None], answers: Sequence[Any]
              ) -> list[str]:
    """Per answer of one prompt, the analysis its trained reply carries (`config.analysis`):
    for 'reanswer' the next `reanswers` answers of the prompt, cyclically, never its own."""
    if config.analysis == "own":
        return [own_analysis(a.confidences[0].text) for a in answers]
    return [reanswer_analysis(others) for others in others_for_each(keys, config.reanswers)]


def sample_graded(engine: Any, tokenizer: Any, examples: Sequence[TaskExample],
                  config: CalibrateSection, progress: Any = None, model: Any = None
                  ) -> list[GradedAnswer]:
    """`answers_per_prompt` graded answers per example with one analysis each (the model's own
    turn-2 analysis, or its re-answers: `config.analysis`), sampled in chunks of
    `batch_prompts` (seeded by `config.seed` and the chunk). `model` (the engine's) reads the
    states `target="readout"` probes."""
    rollout = RolloutSettings(num_generations_answer=config.answers_per_prompt,
                              num_generations_confidence=1, temperature=config.temperature,
                              top_p=config.top_p, top_k=config.top_k,
                              max_answer_tokens=config.max_answer_tokens,
                              max_confidence_tokens=config.max_confidence_tokens,
                              confidence_question=config.confidence_question)
    graded: list[GradedAnswer] = []
    states: list[list[int]] = []  # per answer, the sequence whose last state the probe reads
    for n, start in enumerate(range(0, len(examples), config.batch_prompts)):
        chunk = examples[start:start + config.batch_prompts]
        seed = config.seed * 1_000_003 + n
        tree = sample_answers(engine, tokenizer, chunk, rollout, TWO_TURN.name, seed)
        if config.analysis == "own":  # a re-answer analysis is built from turn 1 alone
            sample_confidences(engine, tokenizer, tree, chunk, rollout, n=1, seed=seed)
        score_tree(tree)
        if config.target == "readout":
            states += state_sequences(tokenizer, tree)
        for prompt in tree.prompts:
            task = get_task(prompt.data_source)
            keys = answer_keys(prompt)
            analyses = _analyses(config, keys, prompt.answers)
            cluster = str(task.readout_cluster(prompt.ground_truth))
            for answer, agree, analysis in zip(prompt.answers, agreement(keys), analyses,
                                               strict=True):
                graded.append(GradedAnswer(
                    prompt.index, task.difficulty(prompt.ground_truth), answer.sample.text,
                    bool(answer.correct), analysis, 0.0, agree,
                    answer_likelihood(answer.sample.logprobs) or 0.0, cluster))
        if progress is not None:
            progress(len(chunk))
    if config.target == "readout":
        graded = _with_readout(model, states, graded)
    targets = confidence_targets(config.target, graded)
    return [replace(g, target=t) for g, t in zip(graded, targets, strict=True)]


def _with_readout(model: Any, states: Sequence[Sequence[int]],
                  graded: Sequence[GradedAnswer]) -> list[GradedAnswer]:
    """Each answer with the probability of being right that a probe of the model's state at
    `<confidence>` gives it, fitted on the other folds (by cluster) of the graded answers."""
    _require_clusters(graded, "readout")
    probe = out_of_fold_readout(last_states(model, states), [g.correct for g in graded],
                                [g.cluster for g in graded])
    return [replace(g, readout=float(p)) for g, p in zip(graded, probe, strict=True)]


def _require_clusters(graded: Sequence[GradedAnswer], target: str) -> None:
    """The held-out targets fit on other clusters' answers: at least two are needed."""
    if len({g.cluster for g in graded}) < 2:
        raise UserError(f"target={target} fits on other prompts' answers: the graded prompts "
                        "are all one cluster; use more prompts")


def _likelihood_targets(graded: Sequence[GradedAnswer]) -> list[float]:
    _require_clusters(graded, "mapped_likelihood")
    return held_out_binned_targets([g.likelihood for g in graded], [g.correct for g in graded],
                                   cluster_folds([g.cluster for g in graded]).tolist())


# `CalibrateSection.target` -> each graded answer's target: its grade, its agreement with the
# prompt's other answers, that agreement mapped to the accuracy at it, or its likelihood mapped
# to the accuracy of other clusters' answers of similar likelihood (folds by `cluster`, as the
# evaluation's readout).
CONFIDENCE_TARGETS: dict[str, Callable[[Sequence[GradedAnswer]], list[float]]] = {
    "label": lambda graded: [float(g.correct) for g in graded],
    "agreement": lambda graded: [float(g.agreement) for g in graded],
    "mapped_agreement": lambda graded: mapped_targets([g.agreement for g in graded],
                                                      [g.correct for g in graded]),
    "mapped_likelihood": _likelihood_targets,
    "readout": lambda graded: [g.readout for g in graded],
}


def confidence_targets(target: str, graded: Sequence[GradedAnswer]) -> list[float]:
    """Each graded answer's target under `CONFIDENCE_TARGETS[target]`."""
    if target not in CONFIDENCE_TARGETS:
        raise ValueError(f"unknown target {target!r}")
    return CONFIDENCE_TARGETS[target](graded)


def confidence_row(tokenizer: Any, example: TaskExample, graded: GradedAnswer,
                   values: ValueTokens, question: str) -> ConfidenceRow:
    """The turn-2 conversation about `graded`'s answer, labelled as `ConfidenceRow` says."""
    digit = int(nearest_value_index(torch.tensor(values.values), torch.tensor([graded.target])))
    head = f"{ANALYSIS_OPEN}{graded.analysis}{ANALYSIS_CLOSE}\n{CONFIDENCE_OPEN}{VALUE_PREFIX}"
    reply = f"{head}{digit}{CONFIDENCE_CLOSE}"
    messages = confidence_messages(example.messages, graded.answer, question)
    messages.append({"role": "assistant", "content": reply})
    full = tokenize_conversation(tokenizer, messages)
    up_to_value = tokenize_conversation(tokenizer, messages, reply_prefix=head)
    value_pos = next(i for i, label in enumerate(up_to_value.labels) if label != IGNORE)
    if full.input_ids[value_pos] != values.ids[digit]:
        raise UserError("the chat template does not write the stated value as one token")
    labels = list(full.labels)
    labels[value_pos] = IGNORE  # the scoring loss covers it
    return ConfidenceRow(full.input_ids, labels, value_pos, graded.target)


def answer_row(tokenizer: Any, example: TaskExample, graded: GradedAnswer
               ) -> TokenizedConversation | None:
    """Turn 1 with the model's own answer as the trained reply; None if the answer is empty."""
    if not graded.answer.strip():
        return None
    messages = [dict(m) for m in example.messages]
    messages.append({"role": "assistant", "content": graded.answer})
    return tokenize_conversation(tokenizer, messages)
