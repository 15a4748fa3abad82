"""What a probe run does: every setting in one frozen, checked value.

Settings that change the probe's numbers are written to `OUT/config.json`; a resumed run must
match them (`ProbeConfig.fingerprint`), so rows of one file always come from one setting.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from calibrl.errors import UserError
from calibrl.protocol.tags import ANSWER_CLOSE, ANSWER_OPEN, THINK_CLOSE, THINK_OPEN

DEFAULT_FRACTIONS: tuple[float, ...] = tuple(i / 10 for i in range(11))
STEPS = "steps"
FORCED_TEXT = f"{THINK_CLOSE}\n{ANSWER_OPEN}"
ANSWER_STOP = ANSWER_CLOSE


def parse_points(text: str) -> tuple[float, ...] | str:
    """`"steps"`, or comma-separated fractions of the chain in [0, 1] (sorted, deduplicated)."""
    text = text.strip()
    if text == STEPS:
        return STEPS
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"--points must be 'steps' or fractions such as 0,0.5,1; got {text!r}"
                        ) from None
    if not values:
        raise UserError("--points is empty; give 'steps' or fractions such as 0,0.5,1")
    bad = [v for v in values if not (math.isfinite(v) and 0.0 <= v <= 1.0)]
    if bad:
        raise UserError(f"--points fractions must lie in [0, 1], got {bad[0]}")
    return tuple(sorted(set(values)))


@dataclass(frozen=True)
class ProbeConfig:
    """How to probe.

    Attributes:
        points: fractions of the chain's tokens to keep, or "steps" (every sentence or line
            boundary of the chain, plus 0 and the whole chain).
        samples: answer-only completions per truncation point (Monte Carlo).
        forced_text: appended after the truncated chain to close the thought and open the answer.
        temperature, top_p, top_k: how the answers are sampled.
        max_answer_tokens: budget of one answer; an answer still open then counts as it is.
        seed: all randomness (answers and sampled traces) derives from it.
        decided_threshold: a trace's answer is "decided" from the earliest point after which
            the share of samples equal to its final answer never drops below this.
        think_open, think_close: the tags around a chain of thought.
        trace_temperature: 0 generates traces greedily, > 0 samples them.
        trace_max_tokens: budget of a generated trace (chain and final answer).
        traces_per_batch: traces whose points are sampled in one batch (speed vs memory).
        max_rows: sequences decoded at once (bounds memory: each holds its forced text and
            answer; a chain is stored once per trace).
        limit: probe at most this many traces (None: all).
        save_samples: also write every sampled answer text into the rows (large files).
        chat_template: "auto" (the tokenizer's) or "plain" ("User: ...\\nAssistant:").
    """

    points: tuple[float, ...] | str = DEFAULT_FRACTIONS
    samples: int = 50
    forced_text: str = FORCED_TEXT
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_answer_tokens: int = 32
    seed: int = 0
    decided_threshold: float = 0.8
    think_open: str = THINK_OPEN
    think_close: str = THINK_CLOSE
    trace_temperature: float = 0.0
    trace_max_tokens: int = 256
    traces_per_batch: int = 8
    max_rows: int = 1024
    limit: int | None = None
    save_samples: bool = False
    chat_template: str = "auto"

    def __post_init__(self) -> None:
        if isinstance(self.points, str):
            object.__setattr__(self, "points", parse_points(self.points))
        else:
            object.__setattr__(self, "points", parse_points(",".join(map(str, self.points))))
        for name in ("samples", "max_answer_tokens", "trace_max_tokens", "traces_per_batch",
                     "max_rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError(f"{name} must be a positive integer, got {value!r}")
        if self.limit is not None and (not isinstance(self.limit, int) or self.limit < 0):
            raise UserError(f"limit must be an integer >= 0, got {self.limit!r}")
        for name in ("temperature", "trace_temperature"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise UserError(f"{name} must be >= 0, got {value!r}")
        if self.temperature == 0 and self.samples > 1:
            raise UserError("temperature 0 repeats one greedy answer per point; use a "
                            "temperature > 0 or samples 1")
        if not 0.0 < self.decided_threshold <= 1.0:
            raise UserError(f"decided_threshold must be in (0, 1], got {self.decided_threshold}")
        if not self.think_open or not self.think_close:
            raise UserError("the think tags must be non-empty")
        if self.chat_template not in ("auto", "plain"):
            raise UserError(f"chat_template must be 'auto' or 'plain', got {self.chat_template!r}")

    @property
    def by_steps(self) -> bool:
        return self.points == STEPS

    @property
    def grid(self) -> tuple[float, ...]:
        """Where the summary evaluates every trace's curves (step points land between these)."""
        return DEFAULT_FRACTIONS if self.by_steps else self.points  # type: ignore[return-value]

    def fingerprint(self) -> dict[str, Any]:
        """The settings a resumed run must share (all but batching, the limit and what is saved)."""
        data = asdict(self)
        for name in ("traces_per_batch", "max_rows", "limit", "save_samples"):
            data.pop(name)
        data["points"] = data["points"] if isinstance(data["points"], str) else list(data["points"])
        return data
