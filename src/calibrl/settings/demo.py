"""`calibrl demo`: the settings of every stage of the CPU demo, read from `configs/demo.yaml`.

The recipe holds the numbers; these classes only say what each one means. The stages' own
settings are the sections of `calibrl sft`, `eval`, `train` and `probe`, so a stage of the demo
can be re-run on its own with the same values.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field, model_validator

from calibrl.settings.base import Section, Seed
from calibrl.settings.calibrate import CalibrateSection
from calibrl.settings.eval import EvalSection
from calibrl.settings.probe import ProbeSection
from calibrl.settings.sft import SFTSection
from calibrl.settings.train import TrainSettings


class DemoDataSection(Section):
    """The Countdown problems the demo generates and how its splits are mixed."""

    n_problems: int = Field(gt=0, description="Problems generated (training and test split).")
    test_size: int = Field(gt=0, description="Problems in the held-out test split.")
    numbers: tuple[int, int] = Field(description="Fewest and most numbers of a problem.")
    size_weights: tuple[float, ...] = Field(description="Relative share of each problem size "
                                            "in `numbers`; the test split keeps it and the RL "
                                            "prompts are drawn in it.")
    max_number: int = Field(gt=0, description="Numbers are drawn from 1..max_number.")
    prompt_style: str = Field(description="The task's prompt style ('compact': just the "
                              "numbers and the target, for a tiny model trained from scratch).")
    sft_size_weights: tuple[float, ...] | None = Field(
        description="SFT rows resampled to these size shares (easy problems repeated); null: "
        "the training split as it is.")
    sft_problems: int = Field(gt=0, description="SFT rows after resampling.")

    @model_validator(mode="after")
    def _consistent(self) -> DemoDataSection:
        low, high = self.numbers
        if not 1 <= low <= high:
            raise ValueError(f"numbers must be [fewest, most] with 1 <= fewest <= most, got "
                             f"{list(self.numbers)}")
        for name in ("size_weights", "sft_size_weights"):
            weights = getattr(self, name)
            if weights is None:
                continue
            if len(weights) != high - low + 1:
                raise ValueError(f"{name} needs one weight per size {low}..{high}, got "
                                 f"{len(weights)}")
            if not all(w >= 0 for w in weights) or sum(weights) <= 0:
                raise ValueError(f"{name} must be non-negative with a positive sum, got "
                                 f"{list(weights)}")
        if self.test_size >= self.n_problems:
            raise ValueError(f"test_size ({self.test_size}) must be below n_problems "
                             f"({self.n_problems})")
        return self


class TinyModelSection(Section):
    """Shape of the tiny model the demo builds (keywords of `calibrl model init`)."""

    hidden_size: int = Field(gt=0, description="Width of the residual stream.")
    num_layers: int = Field(gt=0, description="Number of transformer blocks.")
    num_heads: int = Field(gt=0, description="Attention heads per block.")


class DemoStages(Section):
    """What every demo recipe shares: where it writes, one seed for every stage, the tiny
    model's shape and the SFT, confidence warm-up, evaluation and RL stages (each as its own
    command's section). A recipe adds its `data` (and its other stages, listed in
    `SEEDED_STAGES`)."""

    SEEDED_STAGES: ClassVar[tuple[str, ...]] = ("sft", "calibrate", "eval", "rl")

    out_dir: str = Field(description="Where the demo writes everything.")
    seed: Seed = Field(description="Seed for data, training and sampling; every stage takes it "
                      "(a stage's own seed key must agree or be left out).")
    model: TinyModelSection = Field(description="The tiny model's shape.")
    sft: SFTSection = Field(description="Supervised warm-up (as `calibrl sft`).")
    calibrate: CalibrateSection | None = Field(
        None, description="Confidence warm-up between SFT and RL (as `calibrl calibrate`), on "
        "the RL prompts; null or steps 0: RL starts from the SFT model.")
    eval: EvalSection = Field(description="Evaluation before and after RL (as `calibrl eval`).")
    rl: TrainSettings = Field(description="The RL stage (as `calibrl train`); model.path, "
                              "data.train_path, logging.output_dir and logging.run_name are "
                              "set by the demo.")

    @model_validator(mode="before")
    @classmethod
    def _one_seed(cls, values: Any) -> Any:
        if not isinstance(values, dict) or "seed" not in values:
            return values
        values = dict(values)
        for stage in cls.SEEDED_STAGES:
            if values.get(stage) is None:
                continue  # an optional stage left out, or the field's own error
            section = values[stage]
            if isinstance(section, BaseModel):
                section = section.model_dump()
            if not isinstance(section, dict):
                continue  # the field's own validation reports it
            if section.get("seed", values["seed"]) != values["seed"]:
                raise ValueError(f"{stage}.seed differs from the demo's seed; set seed only")
            values[stage] = {**section, "seed": values["seed"]}
        return values

    @model_validator(mode="after")
    def _one_question(self) -> DemoStages:
        asked = {self.sft.confidence_question, self.eval.confidence_question,
                 self.rl.rollout.confidence_question}
        if self.calibrate is not None:
            asked.add(self.calibrate.confidence_question)
        if len(asked) > 1:
            raise ValueError("sft, calibrate, eval and rl.rollout must ask the same "
                             "confidence_question")
        return self


class DemoSettings(DemoStages):
    """data -> SFT -> eval before -> confidence warm-up -> eval -> two-turn RLCR -> eval after
    -> probe -> report."""

    SEEDED_STAGES: ClassVar[tuple[str, ...]] = ("sft", "calibrate", "eval", "rl", "probe")

    data: DemoDataSection = Field(description="Data generation and mixes.")
    probe: ProbeSection = Field(description="Faithfulness probe of the SFT model's greedy "
                                "chains on the first `probe.limit` test problems.")
