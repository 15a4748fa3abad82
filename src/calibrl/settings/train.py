"""`calibrl train`: the settings of an RL run (also the demo's RL stage)."""

from __future__ import annotations

from pydantic import Field, model_validator

from calibrl.protocol.modes import get_mode
from calibrl.settings.base import Section, Seed
from calibrl.settings.sections import (
    AlgorithmSection,
    CheckpointSection,
    DataSection,
    LoggingSection,
    ModelSection,
    OptimSection,
    RolloutSection,
)


class HeldOutEvalSection(Section):
    """Evaluation on `data.eval_path` while training; the answers are sampled in the run's mode
    with the rollout's token limits and confidence question."""

    every_steps: int = Field(20, gt=0, description="Steps between evaluations on "
                             "data.eval_path; the last step is always evaluated.")
    max_examples: int = Field(64, gt=0, description="Evaluate the first N problems of "
                              "data.eval_path only (keeps each evaluation cheap).")
    samples: int = Field(1, ge=1, description="Answers sampled per problem.")
    temperature: float = Field(0.0, ge=0, allow_inf_nan=False, description="Sampling "
                               "temperature (both turns); 0 = greedy.")
    batch_prompts: int = Field(64, gt=0, description="Problems sampled together.")

    @model_validator(mode="after")
    def _sampling_differs(self) -> HeldOutEvalSection:
        if self.samples > 1 and self.temperature == 0:
            raise ValueError("samples > 1 with temperature 0 repeats one greedy answer; set "
                             "temperature > 0")
        return self


class TrainSettings(Section):
    """A full run: model, data, rollout, algorithm, optimisation, logging, checkpoints."""

    seed: Seed = Field(0, description="Seed for data order, sampling and initialisation.")
    model: ModelSection = Field(default_factory=ModelSection, description="Policy model.")
    data: DataSection = Field(default_factory=DataSection, description="Training/eval data.")
    rollout: RolloutSection = Field(default_factory=RolloutSection, description="Sampling.")
    algorithm: AlgorithmSection = Field(default_factory=AlgorithmSection,
                                        description="Mode, rewards, advantages and loss.")
    optim: OptimSection = Field(default_factory=OptimSection, description="Optimisation.")
    eval: HeldOutEvalSection = Field(default_factory=HeldOutEvalSection,
                                     description="Evaluation on data.eval_path during training.")
    logging: LoggingSection = Field(default_factory=LoggingSection, description="Metrics/logs.")
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection,
                                          description="Checkpointing and resume.")

    @model_validator(mode="after")
    def _check_combinations(self) -> TrainSettings:
        algo, rollout = self.algorithm, self.rollout
        if (get_mode(algo.mode).has_confidence_turn and rollout.num_generations_confidence == 1
                and algo.confidence_level != "prompt" and algo.lambda_conf > 0):
            raise ValueError(
                "num_generations_confidence=1 leaves nothing to normalise per answer: use "
                "num_generations_confidence >= 2, or algorithm.confidence_level=prompt")
        if rollout.num_generations_answer == 1 and algo.lambda_ans > 0:
            raise ValueError("num_generations_answer=1 gives every answer advantage 0; use >= 2")
        if rollout.engine == "vllm" and self.model.path == "tiny":
            raise ValueError("the vllm engine needs a GPU model path, not the built-in 'tiny'")
        if rollout.engine == "vllm" and self.model.lora.r > 0:
            raise ValueError("model.lora with the vllm engine is not supported (vLLM would "
                             "need the merged weights every step); use rollout.engine=hf")
        return self
