"""A batch reward manager with the interface of verl's `RewardManager`, made robust.

For each row: decode the valid prompt tokens followed by the valid response tokens into one string,
pick the scorer by `data_source`, and write the score at the position of the last valid response
token of a zero tensor shaped like the responses. A row whose scorer raises or runs past
`timeout_s` gets its task's `failure_score` instead, so one hostile row never stalls or kills a batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from calibrl.tasks import get_task
from calibrl.utils.timeout import CallTimeout, time_limit

log = logging.getLogger(__name__)


@dataclass
class RewardOutput:
    """Scores of one batch.

    Attributes:
        token_scores: `[B, R]` float32, zero except each row's score at its last valid response
            token (rows with no valid response token stay all-zero).
        scores: `[B]` float32, the per-row score.
        failures: row index -> why it got the failure score (exception or timeout).
    """

    token_scores: torch.Tensor
    scores: torch.Tensor
    failures: dict[int, str] = field(default_factory=dict)


class BatchRewardManager:
    """Scores decoded prompt+response strings with each row's task.

    Args:
        tokenizer: anything with `decode(ids, skip_special_tokens=...)`.
        timeout_s: wall-clock limit per row (enforced in the main thread on POSIX); None disables.
        skip_special_tokens: passed to `decode`. Default False, as in verl: chat markers such as
            `<|im_start|>assistant` are special tokens and the Countdown extractor looks for them.
    """

    def __init__(self, tokenizer: Any, *, timeout_s: float | None = 1.0,
                 skip_special_tokens: bool = False) -> None:
        self.tokenizer = tokenizer
        self.timeout_s = timeout_s
        self.skip_special_tokens = skip_special_tokens

    def score_text(self, text: str, data_source: str, ground_truth: Mapping[str, Any]
                   ) -> tuple[float, str | None]:
        """Score one decoded string; returns (score, failure reason or None). Never raises
        except for an unknown data_source, which is a configuration error."""
        task = get_task(data_source)
        try:
            with time_limit(self.timeout_s):
                value = float(task.score(text, ground_truth))
        except CallTimeout as err:
            return float(task.failure_score), f"timeout: {err}"
        except Exception as err:  # a scorer bug must not cost the run
            return float(task.failure_score), f"{type(err).__name__}: {err}"
        if value != value or value in (float("inf"), float("-inf")):
            return float(task.failure_score), f"non-finite score {value}"
        return value, None

    def compute(
        self,
        prompt_ids: torch.Tensor,
        prompt_mask: torch.Tensor,
        response_ids: torch.Tensor,
        response_mask: torch.Tensor,
        data_sources: Sequence[str],
        ground_truths: Sequence[Mapping[str, Any]],
    ) -> RewardOutput:
        """Score a batch.

        Args:
            prompt_ids: `[B, P]` token ids (any padding side); `prompt_mask` `[B, P]` marks valid ones.
            response_ids: `[B, R]`; `response_mask` `[B, R]` marks valid response tokens.
            data_sources, ground_truths: length B.
        """
        batch = response_ids.shape[0]
        if not (len(data_sources) == len(ground_truths) == batch == prompt_ids.shape[0]):
            raise ValueError("prompt, response, data_source and ground_truth lengths differ")
        token_scores = torch.zeros(response_ids.shape, dtype=torch.float32)
        scores = torch.zeros(batch, dtype=torch.float32)
        failures: dict[int, str] = {}
        for i in range(batch):
            valid_prompt = prompt_ids[i][prompt_mask[i].bool()]
            valid_positions = response_mask[i].nonzero().flatten()
            valid_response = response_ids[i][valid_positions]
            text = self.tokenizer.decode(
                torch.cat([valid_prompt, valid_response]).tolist(),
                skip_special_tokens=self.skip_special_tokens,
            )
            score, failure = self.score_text(text, data_sources[i], ground_truths[i])
            if failure is not None:
                failures[i] = failure
                log.warning("reward row %d scored %s: %s", i, score, failure)
            scores[i] = score
            if len(valid_positions):
                token_scores[i, valid_positions[-1]] = score
        return RewardOutput(token_scores, scores, failures)

    def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """`compute(...).token_scores`, the tensor verl's trainer expects."""
        return self.compute(*args, **kwargs).token_scores
