"""`calibrl sft`: the supervised warm-up's settings (also the demo's SFT stage)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from calibrl.errors import UserError
from calibrl.settings.base import AdamBetas, Probability, Section, Seed, shared_field
from calibrl.settings.sections import ConfidenceSampling

# Tenths: a finer grid (0, 0.05, ..., 1) lowers the ECE a two-level confidence can reach, but
# on the demo RL did not find the finer values in 80 steps (benchmarks/rl/README.md, g05).
CONFIDENCE_GRID = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True)
class SFTMix:
    """Shares of the conversation kinds, and of wrong traces among turn-2 contexts.

    The defaults serve all three RL modes with one model: half answer-only traces (the skill
    every mode needs), a quarter each of the two confidence formats. `early` (off by default)
    adds traces cut after some of their words and answered at once, the format the faithfulness
    probe asks in; only their answer is trained, so the model learns to answer when asked
    early, not to stop thinking early.
    """

    answer: float = 0.5
    confidence: float = 0.25
    rlcr: float = 0.25
    wrong_share: float = 0.5  # of `confidence` contexts whose answer is a corrupted (wrong) trace
    early: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not value >= 0.0:  # also rejects NaN
                raise UserError(f"mix {f.name} must be a non-negative number, got {value}")
        if self.wrong_share > 1.0:
            raise UserError(f"mix wrong_share must be at most 1, got {self.wrong_share}")
        if self.answer + self.confidence + self.rlcr + self.early <= 0.0:
            raise UserError("mix shares answer, confidence, rlcr and early are all 0")

    @property
    def weights(self) -> tuple[float, float, float, float]:
        """Unnormalised weights in `KINDS` order."""
        return (self.answer, self.confidence, self.rlcr, self.early)

    def text(self) -> str:
        """The `NAME=VALUE,...` form `parse_mix` reads."""
        return ",".join(f"{f.name}={getattr(self, f.name):g}" for f in fields(self))


def parse_mix(text: str) -> SFTMix:
    """`"answer=0.5,confidence=0.25,rlcr=0.25,wrong_share=0.5"` (any subset) as an `SFTMix`."""
    values: dict[str, float] = {}
    names = {f.name for f in fields(SFTMix)}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in names:
            raise UserError(f"mix entry {part!r} is not NAME=VALUE with NAME in {sorted(names)}")
        try:
            values[name] = float(value)
        except ValueError:
            raise UserError(f"mix entry {part!r}: {value.strip()!r} is not a number") from None
    return SFTMix(**values)


class SFTSection(Section):
    """How to train: budget, optimiser, batching, conversation mix, precision."""

    steps: int | None = Field(None, gt=0, description="Stop after this many optimiser steps.")
    minutes: float | None = Field(None, gt=0, description="Stop after this much training time.")
    lr: float = Field(2e-3, gt=0, description="Peak AdamW learning rate (2e-3 suits the tiny "
                      "model from scratch; use ~1e-5 for a pretrained LM).")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay.")
    betas: AdamBetas = Field((0.9, 0.95), description="AdamW betas.")
    scheduler: Literal["cosine", "constant_with_warmup"] = Field(
        "cosine", description="Learning-rate shape after warm-up; cosine follows training "
        "progress, the larger of steps done / steps and time used / minutes.")
    warmup_steps: int = Field(50, ge=0, description="Linear warm-up steps.")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="Cosine floor as a share of lr.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    batch_tokens: int = Field(1024, gt=0, description="Padded tokens per batch (rows x "
                              "longest row), grouping conversations of similar length. Small "
                              "batches (more steps) taught the tiny model faster per CPU minute; "
                              "raise it on a GPU.")
    max_seq_len: int = Field(1024, gt=1, description="Longer conversations are dropped "
                             "(counted in the summary).")
    mix: SFTMix = Field(default_factory=SFTMix, description="Shares of the conversation kinds "
                        "(answer, confidence, rlcr, early: cut traces answered at once) and "
                        "of wrong turn-2 contexts, as a mapping or NAME=VALUE,... (any subset).")
    failed_attempt_p: float = Field(0.0, ge=0, lt=1, description="Search traces: the "
                                    "chance of each further failed attempt (a random first "
                                    "step, the last step closest to the target, a miss) "
                                    "before the reference solution in a turn-1 trace, where "
                                    "the task can show one (Countdown); 0 = the solution's "
                                    "steps alone.")
    max_failed_attempts: int = Field(3, ge=0, description="At most this many failed "
                                     "attempts in one trace.")
    confidence_grid: tuple[Probability, ...] = Field(
        CONFIDENCE_GRID, min_length=1, description="The confidences the warm-up's "
        "confidence targets are drawn from (uniformly, whatever the answer's correctness: "
        "SFT teaches the format, RL the calibration); RL can only reach values the model "
        "learned to write.")
    analysis: Literal["neutral", "task", "reanswer"] = Field(
        "neutral", description="The turn-2 analysis the warm-up teaches: 'neutral' sentences "
        "drawn at random, 'task': the task's factual examination of the answer in the "
        "context (`Task.analysis`; Countdown: which given numbers the answer uses), so RL can "
        "learn to read it, or 'reanswer': the question answered again `reanswers` times "
        "(the reference answer; a task without wrong traces gets other problems' answers as "
        "wrong contexts, so that re-answering is recalling, not copying) - what `calibrl "
        "calibrate --analysis reanswer` then teaches the value to compare. Either way the "
        "confidence after it is drawn at random.")
    reanswers: int = Field(3, ge=1, description="Re-answers in a 'reanswer' analysis (the "
                           "same number as the confidence warm-up's).")
    confidence_question: str = shared_field(ConfidenceSampling, "confidence_question")
    train_layers: int | None = Field(None, gt=0, description="Train only the top N decoder "
                                     "blocks and the final norm (embeddings, head and lower "
                                     "blocks frozen: the backward pass stops below them); "
                                     "None trains every weight.")
    bf16: bool = Field(True, description="bf16 autocast for forward/backward (weights and "
                       "optimiser stay fp32).")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="'auto': cuda if "
                                                   "available, else cpu.")
    threads: int | None = Field(None, gt=0, description="torch CPU threads; None keeps "
                                "torch's default (all cores). Fewer can be much faster on a "
                                "machine other jobs are using.")
    seed: Seed = Field(0, description="Seed of model init ('tiny'), data order and sampling.")
    log_every: int = Field(10, gt=0, description="Steps between lines of sft_log.jsonl.")
    progress: bool = Field(True, description="Show a progress bar with ETA.")

    @field_validator("mix", mode="before")
    @classmethod
    def _mix_text(cls, value: Any) -> Any:
        return parse_mix(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _needs_budget(self) -> SFTSection:
        if self.steps is None and self.minutes is None:
            raise ValueError("give steps and/or minutes")
        return self


class SFTSettings(SFTSection):
    """A whole `calibrl sft` run: the section plus what it reads and writes (`sft_config.json`)."""

    data: str = Field(description="Training parquet (verl/TinyZero schema with reference "
                      "solutions, e.g. from `calibrl data countdown`).")
    exclude: tuple[str, ...] = Field((), description="Held-out parquets: any training problem "
                                     "with the same sorted numbers and target is dropped.")
    out: str = Field(description="Output folder: log, config, summary and `model/`.")
    model: str = Field("tiny", description="'tiny' (a fresh default-size tiny model) or a "
                       "model folder loadable with from_pretrained.")
    overwrite: bool = Field(False, description="Replace the run already in OUT (the new run is "
                            "written beside it and swapped in when done).")
    resume: bool = Field(False, description="Continue the run in OUT from its newest intact "
                         "checkpoint.")
    checkpoint_every: int = Field(200, gt=0, description="Steps between checkpoints "
                                  "(OUT/checkpoint-*, the newest 2 kept; one is also written at "
                                  "the end).")
