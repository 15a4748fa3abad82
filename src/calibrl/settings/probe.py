"""`calibrl probe`: what a probe run does (also the demo's probe stage).

Settings that change the probe's numbers are written to `OUT/config.json`; a resumed run must
match them (`ProbeSection.fingerprint`), so rows of one file always come from one setting.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from calibrl.errors import UserError
from calibrl.protocol.completions import EARLY_ANSWER_TEXT
from calibrl.protocol.tags import ANSWER_CLOSE, THINK_CLOSE, THINK_OPEN
from calibrl.settings.base import Seed, redefault, shared_field
from calibrl.settings.sections import AnswerSampling, ModelSection

DEFAULT_FRACTIONS: tuple[float, ...] = tuple(i / 10 for i in range(11))
STEPS = "steps"
# The line break is the forced text's, not the chain's: every cut (the whole chain included)
# ends on text, so each truncated thought closes the way a finished one does.
FORCED_TEXT = EARLY_ANSWER_TEXT  # the warm-up's early answers end their context with it
ANSWER_STOP = ANSWER_CLOSE
# Not part of the fingerprint: they change speed, memory or what is saved, not the numbers.
UNFINGERPRINTED = ("traces_per_batch", "max_rows", "limit", "save_samples")


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


def points_text(points: tuple[float, ...] | str) -> str:
    """The comma-separated form `parse_points` reads."""
    return points if isinstance(points, str) else ",".join(f"{x:g}" for x in points)


class ProbeSection(AnswerSampling):
    """How to probe: where chains are cut, how answers are forced and sampled there."""

    points: tuple[float, ...] | Literal["steps"] = Field(
        DEFAULT_FRACTIONS, description="Fractions of the chain's tokens to keep (a list, or "
        "comma-separated text), or 'steps' for every sentence/line boundary of the chain "
        "(plus 0 and the whole chain).")
    samples: int = Field(50, ge=1, description="Answers sampled per point (Monte Carlo).")
    forced_text: str = Field(FORCED_TEXT, description="Appended after the truncated chain to "
                             "close the thought and open the answer. Cuts never keep the "
                             "whitespace that ends a step or the chain, so the forced text "
                             "brings its own line break.")
    temperature: float = redefault(AnswerSampling, "temperature", 1.0,
                                   description="Temperature of the answers; 0 = greedy.")
    max_answer_tokens: int = redefault(AnswerSampling, "max_answer_tokens", 32,
                                       description="Token budget of one answer; an answer "
                                       "still open then counts as it is.")
    seed: Seed = Field(0, description="Seed of every sample (answers and sampled traces).")
    decided_threshold: float = Field(0.8, gt=0, le=1, description="Share of samples equal to "
                                     "the final answer from which on the answer counts as "
                                     "decided.")
    think_open: str = Field(THINK_OPEN, min_length=1, description="Tag that opens a chain of "
                            "thought.")
    think_close: str = Field(THINK_CLOSE, min_length=1, description="Tag that closes a chain "
                             "of thought.")
    trace_temperature: float = Field(0.0, ge=0, allow_inf_nan=False, description="0: generate "
                                     "traces greedily; > 0: sample.")
    trace_max_tokens: int = Field(256, ge=1, description="Token budget of a generated trace "
                                  "(chain and final answer).")
    traces_per_batch: int = Field(8, ge=1, description="Traces sampled together (speed vs "
                                  "memory; with vllm, larger batches keep the GPU busy).")
    max_rows: int = Field(1024, ge=1, description="Sequences decoded at once (bounds memory).")
    limit: int | None = Field(None, ge=0, description="Probe only the first N traces (None: "
                              "all).")
    save_samples: bool = Field(False, description="Also write every sampled answer's text.")
    chat_template: Literal["auto", "plain"] = shared_field(ModelSection, "chat_template")

    @field_validator("points", mode="before")
    @classmethod
    def _parse_points(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_points(value)
        if isinstance(value, (list, tuple)):
            return parse_points(",".join(map(str, value)))
        return value

    @model_validator(mode="after")
    def _samples_differ(self) -> ProbeSection:
        if self.temperature == 0 and self.samples > 1:
            raise ValueError("temperature 0 repeats one greedy answer per point; use a "
                             "temperature > 0 or samples 1")
        return self

    @property
    def by_steps(self) -> bool:
        return self.points == STEPS

    @property
    def grid(self) -> tuple[float, ...]:
        """Where the summary evaluates every trace's curves (step points land between these)."""
        return DEFAULT_FRACTIONS if self.by_steps else self.points  # type: ignore[return-value]

    def fingerprint(self) -> dict[str, Any]:
        """The settings a resumed run must share (the section's, less `UNFINGERPRINTED`)."""
        data = {name: getattr(self, name) for name in ProbeSection.model_fields
                if name not in UNFINGERPRINTED}
        data["points"] = data["points"] if isinstance(data["points"], str) else list(data["points"])
        return data


class ProbeSettings(ProbeSection):
    """A whole `calibrl probe` run: the section plus inputs, output and the engine."""

    model: str = Field(description="Model folder (config.json, weights and tokenizer), or "
                       "'tiny' for a fresh random tiny model.")
    data: str = Field(description="Data file (.parquet, .json, .jsonl): the problems, their "
                      "ground truth and prompts.")
    out: str = Field(description="Output folder; a stopped probe resumes there.")
    traces: str | None = Field(None, description="JSON-lines traces to probe "
                               "(chain_of_thought, final_answer, optional stated_confidence, "
                               "prompt, index); default: the model generates one per problem.")
    engine: Literal["hf", "vllm"] = Field("hf", description="'hf' (transformers, CPU or GPU) "
                                          "or 'vllm' (CUDA, the calibrl[vllm] extra).")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="'auto', 'cpu' or "
                                                   "'cuda' (hf engine).")
    gpu_memory_utilization: float = Field(0.8, gt=0, le=1, description="Share of the GPU vLLM "
                                          "may take (vllm engine; nothing else runs beside it).")
    dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        None, description="Model dtype (default: float32 with hf, the model's own with vllm).")
    overwrite: bool = Field(False, description="Discard a previous probe in the output folder.")
    progress: bool = Field(True, description="Show a progress bar.")
