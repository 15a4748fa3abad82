"""The readout reference: how well a linear probe of the model's own state, read where it is
about to state its confidence, ranks its answers.

Beside the difficulty table (what needs no model) and the answer likelihood (what the model
knows without saying it), the readout says what the stated confidence *could* read: the last
layer's hidden state at the token that opens `<confidence>` in the sampled turn 2 (or at the end
of turn 2 when the model never opened it), fed to an L2-regularised logistic regression fitted
out of fold. Folds group answers by cluster (`Task.readout_cluster`: the problem by default, or
what the task says belongs together, e.g. a made-up country's four questions in the facts
task), so no answer is scored by a probe that saw its problem, or its country's other facts.

Shapes: N answers, H hidden units.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from calibrl.algo.rollout_tree import RolloutTree
from calibrl.algo.self_estimates import FOLDS, cluster_folds
from calibrl.protocol.tags import CONFIDENCE_OPEN

READOUT_FOLDS = FOLDS
READOUT_L2 = 1e-2
READOUT_FIT = (f"an L2 logistic regression on the last hidden state at {CONFIDENCE_OPEN}, "
               f"fitted out of fold ({READOUT_FOLDS} folds by the task's readout cluster: the "
               f"problem, or e.g. a country)")


def state_position(tokenizer: Any, sampled_ids: Sequence[int]) -> int:
    """How many of the sampled turn-2 tokens to keep: through the one whose text completes
    the first `CONFIDENCE_OPEN`, or all of them when none does."""
    for n in range(1, len(sampled_ids) + 1):
        if CONFIDENCE_OPEN in tokenizer.decode(list(sampled_ids[:n])):
            return n
    return len(sampled_ids)


def state_sequences(tokenizer: Any, tree: RolloutTree) -> list[list[int]]:
    """Per answer, in the order of the tree's prompts and answers: its turn-2 context and first
    confidence sample up to `<confidence>` (`state_position`); the last token's state is read."""
    sequences = []
    for prompt in tree.prompts:
        for answer in prompt.answers:
            sample = answer.confidences[0]
            keep = state_position(tokenizer, sample.token_ids)
            sequences.append(list(sample.context_ids) + list(sample.token_ids[:keep]))
    return sequences


def right_padded(sequences: Sequence[Sequence[int]], batch_size: int, device: Any
                 ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Batches of (ids [B, T], attention mask [B, T], last position [B]): right padding, so
    each position is that of the unpadded sequence."""
    for start in range(0, len(sequences), batch_size):
        chunk = [list(s) for s in sequences[start:start + batch_size]]
        width = max(len(s) for s in chunk)
        ids = torch.tensor([s + [0] * (width - len(s)) for s in chunk], device=device)
        mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in chunk],
                            device=device)
        yield ids, mask, torch.tensor([len(s) - 1 for s in chunk], device=device)


@torch.no_grad()
def last_states(model: Any, sequences: Sequence[Sequence[int]], batch_size: int = 64
                ) -> np.ndarray:
    """[N, H] the last layer's hidden state at each sequence's last token."""
    device = next(model.parameters()).device
    out = []
    for ids, mask, last in right_padded(sequences, batch_size, device):
        # logits_to_keep=1: the states alone are read, not a [B, T, V] projection.
        hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True,
                       logits_to_keep=1).hidden_states[-1]  # [B, T, H]
        out.append(hidden[torch.arange(len(last), device=device), last].float().cpu())
    return torch.cat(out).numpy() if out else np.zeros((0, 0), dtype=np.float32)


def fit_logistic(x: torch.Tensor, y: torch.Tensor, l2: float = READOUT_L2,
                 max_iter: int = 200) -> tuple[torch.Tensor, torch.Tensor]:
    """(w [H], b []) minimising mean binary cross-entropy + l2 * ||w||^2 (torch's L-BFGS).
    x: [N, H] float64, y: [N] in {0, 1}."""
    w = torch.zeros(x.shape[1], dtype=x.dtype, requires_grad=True)
    b = torch.zeros((), dtype=x.dtype, requires_grad=True)
    optimizer = torch.optim.LBFGS([w, b], max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y)
        loss = loss + l2 * (w * w).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return w.detach(), b.detach()


def out_of_fold_readout(features: np.ndarray, correct: Sequence[bool],
                        clusters: Sequence[Hashable], folds: int = READOUT_FOLDS,
                        l2: float = READOUT_L2) -> np.ndarray:
    """[N] each answer's probability of being right under a probe fitted on the other folds
    (features standardised on those folds). A training part with one class predicts its rate."""
    x_all = torch.as_tensor(np.asarray(features, dtype=np.float64))  # [N, H]
    y_all = torch.as_tensor(np.asarray(correct, dtype=np.float64))  # [N]
    fold = cluster_folds(clusters, folds)
    out = np.zeros(len(y_all), dtype=np.float64)
    for k in range(folds):
        test = torch.as_tensor(fold == k)
        if not bool(test.any()):
            continue
        x, y = x_all[~test], y_all[~test]
        rate = float(y.mean()) if len(y) else 0.5
        if len(y) == 0 or rate in (0.0, 1.0):
            out[test.numpy()] = rate
            continue
        mean, std = x.mean(0), x.std(0).clamp(min=1e-6)
        w, b = fit_logistic((x - mean) / std, y, l2)
        out[test.numpy()] = torch.sigmoid(((x_all[test] - mean) / std) @ w + b).numpy()
    return out
