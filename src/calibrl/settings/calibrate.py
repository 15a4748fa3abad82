"""`calibrl calibrate`: the confidence warm-up's settings (also a stage of both demos)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from calibrl.settings.base import Seed, shared_field
from calibrl.settings.sections import ConfidenceSampling
from calibrl.settings.sft import SFTSection


class CalibrateSection(ConfidenceSampling):
    """Which graded answers the model learns to judge, the target, the loss and the budget."""

    prompts: int = Field(700, gt=0, description="Training prompts answered (the first N of "
                         "the data file; never the test split).")
    answers_per_prompt: int = Field(4, ge=1, description="Answers sampled per prompt and "
                                    "graded by the task's verifier (>= 2 for the agreement targets).")
    temperature: float = Field(1.0, gt=0, allow_inf_nan=False, description="Sampling "
                               "temperature of the graded answers and of the model's own "
                               "analyses.")
    batch_prompts: int = Field(64, gt=0, description="Prompts sampled together.")
    target: Literal["label", "agreement", "mapped_agreement", "mapped_likelihood",
                    "readout"] = Field(
        "label", description="What the stated confidence is trained towards: 'label', the "
        "answer's grade (1 right, 0 wrong); 'agreement', the share of the prompt's other "
        "sampled answers that give the same answer (an estimate the model makes of itself); "
        "'mapped_agreement', that share mapped to the accuracy of all graded answers with the "
        "same share (calibrated, and with analysis=reanswer a function of what turn 2 shows); "
        "'mapped_likelihood', the answer's likelihood under the model (exp of its mean token "
        "log-prob when sampled) mapped to the accuracy of other prompts' answers with a "
        "similar likelihood (10 equal-count bins, 5 folds by the task's cluster); 'readout', "
        "the probability of being right that a linear probe of the model's own state at "
        "<confidence> gives the answer, fitted on the other folds' graded answers (the "
        "evaluation's readout reference, so the stated value learns to say what its state "
        "holds; needs analysis=own). No grade is needed at inference either way.")
    analysis: Literal["own", "reanswer"] = Field(
        "own", description="The turn-2 analysis the model is taught to write before its "
        "value: 'own', the analysis it writes now (kept as it is); 'reanswer', the question "
        "answered again `reanswers` times, fresh (the prompt's other sampled answers, e.g. "
        "'Again: <answer>Lizu</answer> <answer>Volir</answer>'), so that the value can "
        "compare answers it can see: a signal that carries to questions never tuned on, where "
        "a learned 'do I know this?' does not (facts). Needs answers_per_prompt > reanswers.")
    reanswers: int = Field(3, ge=1, description="Fresh answers in a 'reanswer' analysis.")
    loss: Literal["expected_brier", "nearest_value_ce", "brier_of_expected"] = Field(
        "expected_brier", description="Loss on the stated value: 'expected_brier', the Brier "
        "score expected under the model's distribution over the value tokens (a proper score "
        "that concentrates the mass on the value nearest the answer's chance); "
        "'nearest_value_ce', cross-entropy to the value nearest the target; "
        "'brier_of_expected', the Brier score of that distribution's expected value (proper "
        "for the reading `eval.confidence_reading: expected`).")
    steps: int = Field(400, ge=0, description="Optimiser steps (0: skip the stage).")
    lr: float = Field(1e-4, gt=0, description="AdamW peak learning rate.")
    warmup_steps: int = Field(20, ge=0, description="Linear warm-up steps.")
    scheduler: Literal["constant_with_warmup", "cosine"] = Field(
        "constant_with_warmup", description="Learning-rate shape after warm-up: constant, or a "
        "cosine from lr down to min_lr_ratio x lr at the last step (a constant rate leaves the "
        "stated level wherever the last noisy steps put it).")
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="The cosine's floor as a share "
                                "of lr.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    batch_size: int = Field(32, gt=0, description="Graded confidence conversations per step.")
    answer_batch_size: int = Field(16, ge=0, description="The model's own correct answers per "
                                   "step, trained with cross-entropy so that the stage keeps "
                                   "the answers (0: none).")
    answer_weight: float = Field(0.1, ge=0, description="Weight of the answers' cross-entropy.")
    format_weight: float = Field(0.1, ge=0, description="Weight of the cross-entropy on the "
                                 "rest of the turn-2 text (the model's own analysis, the tags, "
                                 "the end of turn) and of the value tokens' missing mass, so "
                                 "that the sampled turn 2 stays well formed.")
    train_layers: int | None = shared_field(SFTSection, "train_layers")
    frozen_states: bool = Field(False, description="With train_layers: compute the frozen "
                                "lower blocks' output for every training row once and run only "
                                "the trained blocks at each step (checked equal to the full "
                                "forward on the first batch, else not used). Pays off when the "
                                "steps pass over the graded answers more than once; keeps "
                                "[tokens, hidden] floats per row in memory (SmolLM2, 640 "
                                "answers: about 0.3 GB).")
    bf16: bool = shared_field(SFTSection, "bf16")
    device: Literal["auto", "cpu", "cuda"] = shared_field(SFTSection, "device")
    seed: Seed = Field(0, description="Seed of sampling and batch order.")
    log_every: int = Field(20, gt=0, description="Steps between lines of calibrate_log.jsonl.")
    summary_rows: int = Field(512, gt=0, description="At most this many graded answers (every "
                              "k-th) give the summary's expected confidence of right and wrong "
                              "answers before and after: a forward pass each, minutes on a real "
                              "model.")
    progress: bool = Field(True, description="Show progress bars.")

    @model_validator(mode="after")
    def _enough_answers(self) -> CalibrateSection:
        if self.analysis == "reanswer" and self.answers_per_prompt <= self.reanswers:
            raise ValueError(f"analysis=reanswer shows {self.reanswers} other answers of the "
                             f"prompt: answers_per_prompt must exceed reanswers, got "
                             f"{self.answers_per_prompt}")
        if self.target in ("mapped_likelihood", "readout") and self.prompts < 2:
            raise ValueError(f"target={self.target} maps on held-out prompts: prompts must "
                             "be at least 2")
        if self.target == "readout" and self.analysis != "own":
            raise ValueError("target=readout probes the state after the model's own analysis: "
                             "it needs analysis=own")
        if self.target in ("agreement", "mapped_agreement") and self.answers_per_prompt < 2:
            raise ValueError(f"target={self.target} compares a prompt's answers: answers_per_prompt "
                             "must be at least 2")
        return self


class CalibrateSettings(CalibrateSection):
    """A whole `calibrl calibrate` run: the section plus what it reads and writes."""

    data: str = Field(description="Training prompts (parquet in the verl/TinyZero schema, "
                      "e.g. the RL prompts); the test split must not be here.")
    model: str = Field(description="The warmed-up model folder (from `calibrl sft`).")
    out: str = Field(description="Output folder: config, graded answers, log, summary and "
                     "`model/`.")
    overwrite: bool = Field(False, description="Replace the run already in OUT (written beside "
                            "it and swapped in when done).")
