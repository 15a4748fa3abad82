"""The settings of `calibrl sft`, free of torch so the command line can read defaults and help."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from calibrl.errors import UserError
from calibrl.protocol.prompts import CONFIDENCE_QUESTION
from calibrl.training.sft_data import SFTMix


class SFTConfig(BaseModel):
    """Everything an SFT run reads; written to `OUT/sft_config.json`."""

    # No inf/nan anywhere: an infinite lr or weight decay would train an all-NaN model.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

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
    steps: int | None = Field(None, gt=0, description="Stop after this many optimiser steps.")
    minutes: float | None = Field(None, gt=0, description="Stop after this much training time.")
    lr: float = Field(2e-3, gt=0, description="Peak AdamW learning rate (2e-3 suits the tiny "
                      "model from scratch; use ~1e-5 for a pretrained LM).")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay.")
    betas: tuple[float, float] = Field((0.9, 0.95), description="AdamW betas.")
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
                        "(answer, confidence, rlcr) and of wrong turn-2 contexts.")
    confidence_question: str = Field(CONFIDENCE_QUESTION, min_length=1, description="The "
                                     "turn-2 question of confidence conversations; RL and "
                                     "evaluation must ask the same one "
                                     "(`rollout.confidence_question`, `eval "
                                     "--confidence-question`).")
    bf16: bool = Field(True, description="bf16 autocast for forward/backward (weights and "
                       "optimiser stay fp32).")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="'auto': cuda if "
                                                   "available, else cpu.")
    threads: int | None = Field(None, gt=0, description="torch CPU threads; None keeps "
                                "torch's default (all cores). Fewer can be much faster on a "
                                "machine other jobs are using.")
    seed: int = Field(0, description="Seed of model init ('tiny'), data order and sampling.")
    log_every: int = Field(10, gt=0, description="Steps between lines of sft_log.jsonl.")
    progress: bool = Field(True, description="Show a progress bar with ETA.")

    @model_validator(mode="after")
    def _needs_budget(self) -> SFTConfig:
        if self.steps is None and self.minutes is None:
            raise ValueError("give steps and/or minutes")
        return self

    @classmethod
    def create(cls, **values) -> SFTConfig:
        """Validate `values`; any problem becomes one `UserError` line."""
        try:
            return cls(**values)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            msg = first["msg"].removeprefix("Value error, ")
            raise UserError(f"sft {where}: {msg}" if where else f"sft: {msg}") from None
