"""The stated value's expected value: each evaluated answer's `stated_expected`, beside the one
value the model sampled (`confidence`).

A sampled value is one digit drawn from the model's distribution over the ten tenths; the draw
adds noise that ranks answers worse than the distribution itself (earlier notes: AUROC 0.59 for
one sampled digit against 0.71 for the expected value). So each answer also gets the expected
value of that distribution, renormalised over the ten value tokens
(`calibrl.algo.stated_value.expected_tenths`), read where the value is written in the sampled
turn 2, or where it would be when the reply never writes `<confidence>0.`
(`calibrl.algo.stated_value.value_context_ids`: the reply up to its first `<confidence>`, or
all of it with its analysis closed, then `<confidence>0.`). The sampled value keeps its parse
status; `eval.confidence_reading` chooses which of the two the headline metrics score.

Not available (every answer's `stated_expected` None and `stated_expected_unavailable` the
reason), never a crash: the mode has no confidence turn, no model was given (an engine alone),
or the tokenizer does not write each tenth as "0." and one token (`value_tokens`); one answer
whose value logits are not finite gets None and its own reason. Nothing here is NaN.

Shapes: N answers, T tokens, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from calibrl.algo.readout import last_states, right_padded, state_sequences
from calibrl.algo.rollout_tree import RolloutTree
from calibrl.algo.stated_value import (
    ValueTokens,
    expected_tenths,
    value_context_ids,
    value_tokens,
)
from calibrl.errors import UserError
from calibrl.evaluation.records import EXPECTED_UNAVAILABLE
from calibrl.models.forward import logits_and_states_at

NO_TURN = "the mode states no confidence in a turn of its own"
NO_MODEL = "no model to read the value's logits from (an engine alone)"
NOT_FINITE = "the model's logits at the value are not finite"


def value_sequences(tokenizer: Any, tree: RolloutTree, values: ValueTokens) -> list[list[int]]:
    """Per answer, in the order of the tree's prompts and answers: its first confidence
    sample's context, then `value_context_ids` of its reply; the last token's logits give the
    stated value's distribution."""
    return [list(answer.confidences[0].context_ids)
            + value_context_ids(tokenizer, answer.confidences[0].token_ids, values.prefix)
            for prompt in tree.prompts for answer in prompt.answers]


@torch.no_grad()
def expected_at_last(model: Any, sequences: Sequence[Sequence[int]], values: ValueTokens,
                     batch_size: int = 64, state_positions: Sequence[int] | None = None
                     ) -> tuple[list[float], list[bool], np.ndarray | None]:
    """(expected value, finite) at each sequence's last token, each N long (`expected_tenths`),
    and with `state_positions` ([N] indices into each sequence) the [N, H] last-layer states
    there, from the same pass (else None).

    Right-padded batches (`readout.right_padded`); only the last positions go through the
    output layer (`models.forward.logits_and_states_at`)."""
    device = next(model.parameters()).device
    means: list[float] = []
    finite: list[bool] = []
    states: list[torch.Tensor] = []
    for n, (ids, mask, last) in enumerate(right_padded(sequences, batch_size, device)):
        at = None if state_positions is None else torch.tensor(
            state_positions[n * batch_size:n * batch_size + len(last)], device=device)
        at_last, state = logits_and_states_at(model, ids, mask, last, at)  # [B, V], [B, H]
        if state is not None:
            states.append(state.float().cpu())
        mean, ok = expected_tenths(at_last, values)  # [B], [B]
        means += mean.cpu().tolist()
        finite += ok.cpu().tolist()
    if state_positions is None:
        return means, finite, None
    return means, finite, torch.cat(states).numpy() if states else np.zeros((0, 0), np.float32)


def unavailable(model: Any, tokenizer: Any, tree: RolloutTree) -> str | None:
    """Why no answer of `tree` gets a `stated_expected` (module docstring), or None."""
    if not tree.spec.has_confidence_turn:
        return NO_TURN
    if model is None:
        return NO_MODEL
    try:
        value_tokens(tokenizer)
    except UserError as exc:
        return str(exc)
    return None


def stated_expected_fields(model: Any, tokenizer: Any, tree: RolloutTree
                           ) -> list[dict[str, Any]]:
    """Per answer, in record order (`value_sequences`): {"stated_expected": value in [0, 0.9]},
    or {"stated_expected": None, `EXPECTED_UNAVAILABLE`: why} (module docstring)."""
    return turn2_reads(model, tokenizer, tree, readout=False)[0]


def turn2_reads(model: Any, tokenizer: Any, tree: RolloutTree, readout: bool
                ) -> tuple[list[dict[str, Any]], np.ndarray | None]:
    """`stated_expected_fields`, and with `readout` the readout's [N, H] states
    (`readout.state_sequences`): read from the value pass where an answer's state sequence
    is a prefix of its value sequence (it wrote `<confidence>` as the value pass does), by a
    pass of their own for the others, so each turn 2 goes through the model once or twice."""
    count = sum(len(prompt.answers) for prompt in tree.prompts)
    reason = unavailable(model, tokenizer, tree)
    state_seqs = state_sequences(tokenizer, tree) if readout else []
    if reason is not None:
        return ([{"stated_expected": None, EXPECTED_UNAVAILABLE: reason}] * count,
                last_states(model, state_seqs) if readout else None)
    values = value_tokens(tokenizer)
    sequences = value_sequences(tokenizer, tree, values)
    if not readout:
        means, finite, _ = expected_at_last(model, sequences, values)
        return _fields(means, finite), None
    shared = [seq[:len(st)] == st for seq, st in zip(sequences, state_seqs, strict=True)]
    positions = [len(st) - 1 if ok else len(seq) - 1  # the others' states: read again below
                 for seq, st, ok in zip(sequences, state_seqs, shared, strict=True)]
    means, finite, states = expected_at_last(model, sequences, values,
                                             state_positions=positions)
    rest = [i for i, ok in enumerate(shared) if not ok]
    if rest:
        states[rest] = last_states(model, [state_seqs[i] for i in rest])
    return _fields(means, finite), states


def _fields(means: list[float], finite: list[bool]) -> list[dict[str, Any]]:
    return [{"stated_expected": mean} if ok else
            {"stated_expected": None, EXPECTED_UNAVAILABLE: NOT_FINITE}
            for mean, ok in zip(means, finite, strict=True)]
