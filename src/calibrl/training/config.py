"""The one typed config of a calibrl run.

Every option is a field with help text; nothing else in the code base reads a setting from
anywhere but here. Loaded from YAML plus `key=value` overrides (dotted keys, YAML-typed values),
validated at start-up; any problem becomes one `UserError` line. The resolved config is written
verbatim into each run directory.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from calibrl.errors import UserError
from calibrl.protocol.modes import DEFAULT_MODE, get_mode, modes_help
from calibrl.protocol.prompts import CONFIDENCE_QUESTION as DEFAULT_CONFIDENCE_QUESTION


class _Section(BaseModel):
    # No inf/nan anywhere: `optim.lr=.inf` would train an all-NaN model.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class ModelConfig(_Section):
    path: str = Field("tiny", description="Hugging Face model directory or hub-style name, or "
                      "'tiny' to build calibrl's tiny Countdown model in the run directory.")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="Dtype the weights are loaded in.")
    chat_template: Literal["auto", "plain"] = Field(
        "auto", description="'auto': the tokenizer's chat template; 'plain': 'User: ... "
        "Assistant:' text for base models without one.")
    trust_remote_code: bool = Field(False, description="Passed to from_pretrained.")


class DataConfig(_Section):
    train_path: str = Field("data/countdown/train.parquet",
                            description="Training parquet (verl/TinyZero schema).")
    eval_path: str | None = Field(None, description="Held-out parquet for evaluation.")
    max_prompt_tokens: int = Field(256, gt=0, description="Longer prompts are left-truncated "
                                   "(and counted in the logs).")
    shuffle: bool = Field(True, description="Shuffle training prompts each epoch (seeded).")
    task_modules: list[str] = Field(default_factory=list, description="Python modules imported "
                                    "at start-up; tasks they register with "
                                    "calibrl.tasks.register_task can then be data sources.")


class RolloutConfig(_Section):
    engine: Literal["hf", "vllm"] = Field("hf", description="Generation engine: transformers "
                                          "(CPU/GPU) or vLLM (GPU, extra `calibrl[vllm]`).")
    prompts_per_step: int = Field(8, gt=0, description="Prompts sampled per training step.")
    num_generations_answer: int = Field(4, ge=1, description="G_a: answers sampled per prompt "
                                        "(turn 1); the GRPO group size.")
    num_generations_confidence: int = Field(2, ge=1, description="G_c: confidence completions "
                                            "sampled per answer (turn 2, in modes that have "
                                            "one).")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature (both turns).")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling threshold.")
    top_k: int = Field(0, ge=0, description="Top-k sampling; 0 disables.")
    max_answer_tokens: int = Field(128, gt=0, description="Max new tokens of a turn-1 answer "
                                   "(or of the whole single-turn RLCR completion).")
    max_confidence_tokens: int = Field(48, gt=0, description="Max new tokens of a turn-2 "
                                       "confidence completion.")
    confidence_question: str = Field(DEFAULT_CONFIDENCE_QUESTION, description="User message "
                                     "inserted before turn 2.")
    max_batch_size: int = Field(64, gt=0, description="Most sequences decoded at once (memory "
                                "bound of the transformers engine).")
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="vLLM's share of "
                                               "GPU memory when colocated with training.")


class AlgorithmConfig(_Section):
    mode: str = Field(DEFAULT_MODE, description=modes_help())
    lambda_ans: float = Field(1.0, ge=0, description="Weight of answer advantages.")
    lambda_conf: float = Field(1.0, ge=0, description="Weight of confidence advantages.")
    confidence_level: Literal["answer", "answer_then_prompt", "prompt"] = Field(
        "answer", description="Where confidence rewards are normalised: over each answer's G_c "
        "siblings, that then re-z-scored per prompt, or all of a prompt's G_a*G_c at once "
        "(mixes answers; ablation only).")
    normalize_std: bool = Field(True, description="Divide advantages by the group std "
                                "(population) + eps; mean-centring only when false.")
    confidence_std_scope: Literal["group", "batch"] = Field(
        "group", description="With normalize_std, the std that scales confidence advantages: "
        "each group's own (as for answers; with num_generations_confidence=2 every "
        "advantage becomes +-1 and the confidence drifts to the majority outcome), or one std "
        "over the batch after centring within groups (keeps the Brier differences' sizes, so "
        "confidence moves toward the accuracy).")
    eps: float = Field(1e-6, gt=0, description="Added to the std in advantage normalisation.")
    clip_low: float = Field(0.2, ge=0, lt=1, description="Lower PPO clip range (1 - clip_low).")
    clip_high: float = Field(0.2, ge=0, description="Upper PPO clip range (1 + clip_high).")
    dual_clip: float | None = Field(None, gt=1, description="Dual-clip constant c for negative "
                                    "advantages; None disables.")
    loss_agg: Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"] = Field(
        "token_mean", description="Loss normalisation: over all masked tokens of the batch "
        "(every token weighs the same), per-sequence mean (GRPO), or sum / (rows * max_len) "
        "(Dr. GRPO).")
    kl_coef: float = Field(0.0, ge=0, description="KL penalty to the reference model; 0 loads "
                           "no reference model.")
    kl_estimator: Literal["k1", "k2", "k3"] = Field("k3", description="KL estimator.")
    ppo_epochs: int = Field(1, ge=1, description="Optimisation passes over each rollout; >1 "
                            "recomputes old log-probs with the pre-update policy.")

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        try:
            return get_mode(value).name
        except UserError as err:  # pydantic reports ValueErrors with the field's name
            raise ValueError(str(err)) from None


class OptimConfig(_Section):
    lr: float = Field(1e-5, gt=0, description="Peak learning rate (AdamW).")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    scheduler: Literal["constant", "constant_with_warmup", "linear", "cosine"] = Field(
        "constant_with_warmup", description="transformers learning-rate schedule.")
    warmup_steps: int = Field(0, ge=0, description="Warm-up optimiser steps.")
    total_steps: int = Field(100, gt=0, description="Training steps (one rollout each).")
    micro_batch_size: int = Field(16, gt=0, description="Rows per forward/backward; gradients "
                                  "accumulate over a step's micro-batches.")
    mixed_precision: Literal["no", "bf16", "fp16"] = Field(
        "no", description="accelerate mixed precision (bf16 autocast also speeds up CPUs).")

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _yaml_no(cls, value: Any) -> Any:
        return "no" if value is False else value  # `mixed_precision: no` in a YAML file


class LoggingConfig(_Section):
    output_dir: str = Field("outputs", description="Parent folder of run directories.")
    run_name: str | None = Field(None, description="Run directory name; default: mode + time.")
    log_every: int = Field(1, gt=0, description="Steps between metric records.")
    tensorboard: bool = Field(True, description="Write TensorBoard event files.")
    wandb: bool = Field(False, description="Also log to Weights & Biases (extra `calibrl[wandb]`).")
    wandb_project: str = Field("calibrl", description="W&B project.")
    samples_every: int = Field(10, gt=0, description="Steps between sample-conversation tables.")
    num_samples: int = Field(3, ge=0, description="Conversations in each sample table.")


class CheckpointConfig(_Section):
    every: int = Field(20, gt=0, description="Steps between checkpoints.")
    keep_last: int = Field(2, ge=1, description="Checkpoints kept (older ones deleted).")
    resume: str | None = Field(None, description="'auto' (the newest intact checkpoint in the run "
                               "directory) or a checkpoint path to resume from.")
    overwrite: bool = Field(False, description="Replace a run directory that already holds a "
                            "run; the new run is written beside it and swapped in when done.")


class Config(_Section):
    """A full run: model, data, rollout, algorithm, optimisation, logging, checkpoints."""

    seed: int = Field(0, description="Seed for data order, sampling and initialisation.")
    model: ModelConfig = Field(default_factory=ModelConfig, description="Policy model.")
    data: DataConfig = Field(default_factory=DataConfig, description="Training/eval data.")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="Sampling.")
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig,
                                       description="Mode, rewards, advantages and loss.")
    optim: OptimConfig = Field(default_factory=OptimConfig, description="Optimisation.")
    logging: LoggingConfig = Field(default_factory=LoggingConfig, description="Metrics/logs.")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig,
                                         description="Checkpointing and resume.")

    @model_validator(mode="after")
    def _check_combinations(self) -> Config:
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
        return self


def _known_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            keys += _known_keys(ann, f"{prefix}{name}.")
        else:
            keys.append(prefix + name)
    return keys


def _format_error(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    if first["type"] == "extra_forbidden":
        close = difflib.get_close_matches(where, _known_keys(Config), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return f"unknown config key '{where}'{hint}"
    msg = first["msg"].removeprefix("Value error, ")
    if where:
        return f"config {where}: {msg} (got {first.get('input')!r})"
    return f"config: {msg}"


def _set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise UserError(f"override '{key}': '{part}' is not a section")
        node = child
    node[parts[-1]] = value


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """`["a.b=1", "c=x"]` -> nested dict, values parsed as YAML scalars (so `1e-5`, `true`,
    `null`, `[1, 2]` get their types)."""
    tree: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"override '{item}' is not key=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, bool) and raw.strip().lower() not in ("true", "false"):
            value = raw.strip()  # YAML 1.1 reads yes/no/on/off as booleans; keep the word
        _set_dotted(tree, key.strip(), value)
    return tree


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Config from an optional YAML file plus `key=value` overrides; `UserError` on any problem."""
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise UserError(f"config file not found: {path}")
        try:
            loaded = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise UserError(f"config file {path} is not valid YAML: {str(err).splitlines()[0]}"
                            ) from None
        if loaded is not None and not isinstance(loaded, dict):
            raise UserError(f"config file {path} must hold a mapping, not {type(loaded).__name__}")
        data = loaded or {}
    data = _merge(data, parse_overrides(overrides or []))
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise UserError(_format_error(err)) from None


def dump_config(config: Config) -> str:
    """The resolved config as YAML (what every run directory records)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
