"""One forward pass that keeps only the logits a caller reads.

A full pass of a real vocabulary builds [B, T, V] logits (SmolLM2: 49,152 columns, ~2 GB for a
batch of 64 turn-2 replies) where the stated value needs one position per row; transformers'
`logits_to_keep` takes the positions to project, so only the batch's distinct ones are.
"""

from __future__ import annotations

from typing import Any

import torch


def logits_at(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
              positions: torch.Tensor) -> torch.Tensor:
    """[B, V] each row's logits at `positions` ([B]) of input_ids / attention_mask ([B, T]):
    the distribution of the token after that position."""
    return logits_and_states_at(model, input_ids, attention_mask, positions, None)[0]


def logits_from(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                start: int) -> torch.Tensor:
    """[B, T - start, V] the logits at positions start..T-1 of input_ids ([B, T]): what a loss
    on the tokens after `start` reads (0 <= start < T)."""
    keep = input_ids.shape[1] - start
    if not 0 < keep <= input_ids.shape[1]:
        raise ValueError(f"start {start} outside 0..{input_ids.shape[1] - 1}")
    return model(input_ids=input_ids, attention_mask=attention_mask,
                 logits_to_keep=keep).logits


def logits_and_states_at(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                         positions: torch.Tensor, state_positions: torch.Tensor | None
                         ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`logits_at`'s [B, V], and from the same pass [B, H] the last layer's hidden state of
    each row at `state_positions` ([B]; None: no states, None returned)."""
    kept, column = torch.unique(positions, return_inverse=True)  # [U], [B] index into kept
    out = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=kept,
                output_hidden_states=state_positions is not None)
    rows = torch.arange(len(positions), device=out.logits.device)
    states = None if state_positions is None else out.hidden_states[-1][rows, state_positions]
    return out.logits[rows, column], states  # logits [B, U, V] -> [B, V]
