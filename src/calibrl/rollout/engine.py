"""The generation-engine interface: sampling parameters and one generated sample.

Every engine takes token-id prompts and returns, per prompt, `n` `Generation`s with the same
conventions, so a trainer never cares which engine produced them:

- `token_ids`: generated tokens only (no prompt). A sample that ends on EOS keeps the EOS token;
  one that ends on a stop string keeps every token up to and including the token that completes
  the stop string (never cut inside a token, so a tag such as `</answer>` is never split).
- `text`: `tokenizer.decode(token_ids, skip_special_tokens=True)`, exactly; it may run a few
  characters past the stop string when the completing token does.
- `logprobs`: per generated token, the log-prob under `softmax(logits / temperature)` before
  top-k / top-p filtering (greedy: under `softmax(logits)`); see `calibrl.rollout.sampling`.
- `finish_reason`: "stop" (EOS or a stop string) or "length" (`max_new_tokens` reached first; a
  truncated sample).

The engines build on this module and `calibrl.rollout.factory` builds them, so this module
imports no engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from calibrl.errors import UserError

FinishReason = Literal["stop", "length"]


@dataclass(frozen=True)
class SamplingParams:
    """How to sample.

    Attributes:
        n: samples per prompt.
        temperature: softmax temperature; 0 means greedy.
        top_p: nucleus mass in (0, 1]; 1 disables.
        top_k: keep the k most likely tokens; 0 disables.
        max_new_tokens: generated tokens at most; reaching it is reported as "length".
        stop: strings that end a sample once the decoded generated text contains one.
        seed: makes sampling deterministic; None draws one from torch's global RNG (so
            `torch.manual_seed` still makes a run reproducible). Give each RL step its own seed.
        first_stream: the random stream of prompt `i` is `first_stream + i`. Processes that
            each generate a shard of one batch pass their shard's offset, so every sample is the
            one a single process generating the whole batch would draw.
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 256
    stop: tuple[str, ...] = field(default_factory=tuple)
    seed: int | None = None
    first_stream: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        object.__setattr__(self, "stop", tuple(self.stop))
        if not isinstance(self.n, int) or self.n < 1:
            raise UserError(f"sampling n must be a positive integer, got {self.n!r}")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise UserError(f"temperature must be >= 0, got {self.temperature!r}")
        if not (0 < self.top_p <= 1):
            raise UserError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise UserError(f"top_k must be an integer >= 0 (0 disables it), got {self.top_k!r}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise UserError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise UserError(f"stop strings must be non-empty strings, got {self.stop!r}")
        if self.seed is not None and not isinstance(self.seed, int):
            raise UserError(f"seed must be an integer or None, got {self.seed!r}")
        if not isinstance(self.first_stream, int) or self.first_stream < 0:
            raise UserError(f"first_stream must be an integer >= 0, got {self.first_stream!r}")

    @property
    def filtered(self) -> bool:
        """Whether top-k or top-p changes the distribution sampled from."""
        return self.top_k > 0 or self.top_p < 1


@dataclass
class Generation:
    """One sampled continuation (conventions in the module docstring)."""

    token_ids: list[int]
    text: str
    logprobs: list[float]
    finish_reason: FinishReason


@runtime_checkable
class Engine(Protocol):
    """What the rollout needs from a generation engine."""

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams
    ) -> list[list[Generation]]:
        """Sample `params.n` continuations of each prompt; outer list = prompts, inner = samples."""
        ...

    def update_weights(self, model: Any) -> None:
        """Make later generations use `model`'s current weights (call after each optimiser step)."""
        ...


def check_prompts(prompts: Sequence[Sequence[int]]) -> list[list[int]]:
    """Prompts as lists of ints; an empty prompt is a user error (nothing to condition on)."""
    out = []
    for i, p in enumerate(prompts):
        ids = [int(t) for t in p]
        if not ids:
            raise UserError(f"prompt {i} is empty; every prompt needs at least one token")
        out.append(ids)
    return out
