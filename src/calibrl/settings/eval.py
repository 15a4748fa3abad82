"""`calibrl eval`: how a model is evaluated (also every evaluation of the demo)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from calibrl.protocol.modes import DEFAULT_MODE, get_mode
from calibrl.settings.base import Seed
from calibrl.settings.sections import (
    REANSWERS_SHOWN_HELP,
    ConfidenceSampling,
    check_reanswers_shown,
    known_mode,
)


class EvalSection(ConfidenceSampling):
    """Sampling of the evaluated answers (and confidences) and how many."""

    mode: str = Field(DEFAULT_MODE, description="Format of the answers (and of the confidence "
                      "turn): a mode name as in algorithm.mode.")
    samples: int = Field(1, ge=1, description="Answers sampled per prompt.")
    temperature: float = Field(0.0, ge=0, allow_inf_nan=False, description="Sampling "
                               "temperature (both turns, unless confidence_temperature is "
                               "set); 0 = greedy.")
    confidence_temperature: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="Sampling temperature of the confidence "
        "turn alone; None: `temperature`. 0 states the model's most likely value, so the "
        "stated confidence does not carry the noise of one sampled digit.")
    max_examples: int | None = Field(None, ge=0, description="Evaluate the first N examples "
                                     "only (None: all).")
    batch_prompts: int = Field(64, gt=0, description="Prompts sampled together.")
    seed: Seed = Field(0, description="Sampling seed.")
    bootstrap: int = Field(1000, ge=0, description="Bootstrap draws over the evaluated "
                           "problems (all answers of a problem drawn together): the standard "
                           "error and 95 % interval of accuracy, ECE, Brier, AUROC and AURC, "
                           "printed and saved in metrics.json as 'bootstrap'; 0: none.")
    readout: bool = Field(True, description="In the two-turn mode, also score the readout "
                          "reference: an out-of-fold logistic regression on the model's last "
                          "hidden state at <confidence> (what the stated confidence could "
                          "read), beside the difficulty table and the answer likelihood.")

    confidence_reading: Literal["sampled", "expected"] = Field(
        "sampled", description="Which reading of the stated confidence the metrics, tables "
        "and figures report; the other is shown beside it with the references. 'sampled': the "
        "value the model wrote in its sampled confidence (parsed; an unparsable one scores 0). "
        "'expected': the expected value of its distribution over the ten tenths 0.0-0.9 where "
        "it writes the value, after its own reply up to <confidence> (or all of it, analysis "
        "closed) and '<confidence>0.': every answer has one. Needs a mode with a confidence "
        "turn, and a tokenizer that writes each tenth as '0.' and one token (else not "
        "available, with the reason).")
    reanswers_shown: int = Field(0, ge=0, description=REANSWERS_SHOWN_HELP)

    _known_mode = field_validator("mode")(known_mode)

    @model_validator(mode="after")
    def _sampling_differs(self) -> EvalSection:
        if self.samples > 1 and self.temperature == 0:
            raise ValueError("samples > 1 with temperature 0 repeats one greedy answer; set "
                             "temperature > 0")
        check_reanswers_shown(self.reanswers_shown, self.samples, "samples")
        if self.confidence_reading == "expected" and not get_mode(self.mode).has_confidence_turn:
            raise ValueError(f"confidence_reading=expected reads the confidence turn; mode "
                             f"{self.mode} has none (use two_turn)")
        return self


class EvalSettings(EvalSection):
    """A whole `calibrl eval` run: the section plus the model, the data and the output."""

    @field_validator("data", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        # One file is written as a plain string in configs and on the command line.
        return (value,) if isinstance(value, str) else value

    @field_validator("data")
    @classmethod
    def _some(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("give at least one data file")
        return value

    model: str = Field(description="Saved model directory (or 'tiny').")
    data: tuple[str, ...] = Field(description="Parquet/JSON(L) file(s) to evaluate on; with "
                                  "several (--data A --data B, any mix of tasks) each is "
                                  "reported in OUT/<name> and all together in OUT/pooled.")
    out: str = Field(description="Output directory.")
    name: str | None = Field(None, description="Run name in tables (default: the output "
                             "folder).")
    overwrite: bool = Field(False, description="Replace the evaluation already in OUT (its "
                            "predictions, metrics and figures; other files stay).")

