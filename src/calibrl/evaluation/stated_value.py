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

import torch

from calibrl.algo.rollout_tree import RolloutTree
from calibrl.algo.stated_value import (
    ValueTokens,
    expected_tenths,
    value_context_ids,
    value_tokens,
)
from calibrl.errors import UserError
from calibrl.evaluation.readout import right_padded
from calibrl.evaluation.records import EXPECTED_UNAVAILABLE

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
                     batch_size: int = 64) -> tuple[list[float], list[bool]]:
    """(expected value, finite) at each sequence's last token, each N long (`expected_tenths`).

    Right-padded batches (`readout.right_padded`); only the batch's distinct last positions
    go through the output layer."""
    device = next(model.parameters()).device
    means: list[float] = []
    finite: list[bool] = []
    for ids, mask, last in right_padded(sequences, batch_size, device):
        kept, column = torch.unique(last, return_inverse=True)  # [U], [B] index into kept
        logits = model(input_ids=ids, attention_mask=mask,
                       logits_to_keep=kept).logits  # [B, U, V]
        at_last = logits[torch.arange(len(last), device=device), column]  # [B, V]
        mean, ok = expected_tenths(at_last, values)  # [B], [B]
        means += mean.cpu().tolist()
        finite += ok.cpu().tolist()
    return means, finite


def stated_expected_fields(model: Any, tokenizer: Any, tree: RolloutTree
                           ) -> list[dict[str, Any]]:
    """Per answer, in record order (`value_sequences`): {"stated_expected": value in [0, 0.9]},
    or {"stated_expected": None, `EXPECTED_UNAVAILABLE`: why} (module docstring)."""
    count = sum(len(prompt.answers) for prompt in tree.prompts)
    reason = NO_TURN if not tree.spec.has_confidence_turn else NO_MODEL if model is None else None
    if reason is None:
        try:
            values = value_tokens(tokenizer)
        except UserError as exc:
            reason = str(exc)
    if reason is not None:
        return [{"stated_expected": None, EXPECTED_UNAVAILABLE: reason} for _ in range(count)]
    means, finite = expected_at_last(model, value_sequences(tokenizer, tree, values), values)
    return [{"stated_expected": mean} if ok else
            {"stated_expected": None, EXPECTED_UNAVAILABLE: NOT_FINITE}
            for mean, ok in zip(means, finite, strict=True)]
