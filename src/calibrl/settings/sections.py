"""The sections commands are built from: model, data, sampling, rollout, algorithm, optimiser,
logging and checkpoints. `calibrl train` uses all of them; eval and probe share the sampling
fields (`AnswerSampling`, `ConfidenceSampling`) with the rollout of training.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from calibrl.errors import UserError
from calibrl.protocol.modes import DEFAULT_MODE, get_mode, modes_help
from calibrl.protocol.prompts import CONFIDENCE_QUESTION
from calibrl.settings.base import AdamBetas, Section


class LoraSection(Section):
    """A LoRA adapter (peft) instead of training every weight."""

    r: int = Field(0, ge=0, description="LoRA rank; 0 trains every weight (no adapter). "
                   "Above 0 needs peft (extra `calibrl[peft]`); checkpoints then hold the "
                   "adapter and final-model the merged weights.")
    alpha: float = Field(16.0, gt=0, description="LoRA alpha: the update is scaled by "
                         "alpha / r.")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the LoRA branch's input.")
    target_modules: str | list[str] = Field(
        "all-linear", description="Modules that get an adapter: 'all-linear' (every linear "
        "layer but the output head) or a list of module names, e.g. [q_proj, v_proj].")


class ModelSection(Section):
    path: str = Field("tiny", description="Hugging Face model directory or hub-style name, or "
                      "'tiny' to build calibrl's tiny Countdown model in the run directory.")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="Dtype the weights are loaded in.")
    chat_template: Literal["auto", "plain"] = Field(
        "auto", description="'auto': the tokenizer's chat template; 'plain': 'User: ... "
        "Assistant:' text for base models without one.")
    trust_remote_code: bool = Field(False, description="Passed to from_pretrained.")
    gradient_checkpointing: bool = Field(False, description="Recompute activations in the "
                                         "backward pass (transformers' "
                                         "gradient_checkpointing_enable): less memory, about "
                                         "a third more compute per update.")
    lora: LoraSection = Field(default_factory=LoraSection, description="LoRA adapter.")
    train_layers: int | None = Field(None, gt=0, description="Train only the top N decoder "
                                     "blocks and the final norm (with LoRA: their adapters); "
                                     "embeddings, head and lower blocks stay frozen and the "
                                     "backward pass stops below them. None: every weight (or "
                                     "every adapter).")


class DataSection(Section):
    train_path: str = Field("data/countdown/train.parquet",
                            description="Training rows (verl/TinyZero schema or Countdown "
                            "{target, nums}): a .parquet/.json/.jsonl file, a folder (saved "
                            "by datasets, or of data files), or a Hub data set id "
                            "'org/name[:split]' or 'org/name:config:split' (split: train).")
    eval_path: str | None = Field(None, description="Held-out data evaluated during training "
                                  "(see eval.*): accuracy, ECE, Brier and AUROC go to the "
                                  "metrics log as eval/*; None: no evaluation.")
    max_prompt_tokens: int = Field(256, gt=0, description="Longer prompts are left-truncated "
                                   "(and counted in the logs).")
    shuffle: bool = Field(True, description="Shuffle training prompts each epoch (seeded).")
    task_modules: list[str] = Field(default_factory=list, description="Python modules imported "
                                    "at start-up; tasks they register with "
                                    "calibrl.tasks.register_task can then be data sources.")


class AnswerSampling(Section):
    """How answers are sampled (every command that generates)."""

    temperature: float = Field(1.0, ge=0, allow_inf_nan=False,
                               description="Sampling temperature; 0 = greedy.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling threshold (1 = off).")
    top_k: int = Field(0, ge=0, description="Top-k sampling; 0 disables.")
    max_answer_tokens: int = Field(128, gt=0, description="Max new tokens of a turn-1 answer "
                                   "(or of the whole single-turn RLCR completion).")
    decode: Literal["exact", "fused"] = Field(
        "exact", description="The transformers engine's decoding step: 'exact', logits "
        "bit-identical to model(...); 'fused', quicker on CPU (one product for q/k/v and for "
        "gate/up, norm weights folded in, oneDNN products), equal up to float rounding, so a "
        "sample now and then differs (tested equal in distribution). vLLM ignores it.")


class ConfidenceSampling(AnswerSampling):
    """Answer sampling plus the confidence turn (training and evaluation)."""

    max_confidence_tokens: int = Field(48, gt=0, description="Max new tokens of a turn-2 "
                                       "confidence completion.")
    confidence_question: str = Field(CONFIDENCE_QUESTION, min_length=1, description="The "
                                     "turn-2 question (the user message before the confidence "
                                     "turn); SFT, RL and evaluation must ask the same one.")


REANSWERS_SHOWN_HELP = (
    "Turn 2 in modes with a confidence turn: 0, the model writes its whole reply; k > 0, the "
    "reply starts with an analysis the rollout writes, `<analysis>Again: <answer>…</answer> "
    "…</analysis>`, holding k of the prompt's other sampled answers (each answer shown the next "
    "k, cyclically; never its own), and the model writes the rest, its confidence. Independent "
    "draws, where the re-answers a model writes itself copy each other; pair it with `calibrate "
    "--analysis reanswer`, which trains the value to read them. Needs more answers per prompt "
    "than k.")


def check_reanswers_shown(shown: int, answers_per_prompt: int, name: str) -> None:
    """Refuse showing k other answers with k or fewer answers per prompt."""
    if shown and answers_per_prompt <= shown:
        raise ValueError(f"reanswers_shown={shown} shows other answers of the prompt: {name} "
                         f"must exceed it, got {answers_per_prompt}")


class RolloutSection(ConfidenceSampling):
    temperature: float = Field(1.0, gt=0, allow_inf_nan=False,
                               description="Sampling temperature (both turns).")
    engine: Literal["hf", "vllm"] = Field("hf", description="Generation engine: transformers "
                                          "(CPU/GPU) or vLLM (GPU, extra `calibrl[vllm]`).")
    prompts_per_step: int = Field(8, gt=0, description="Prompts sampled per training step, "
                                  "over all processes: each of N processes rolls out "
                                  "prompts_per_step / N of them (N must divide it).")
    num_generations_answer: int = Field(4, ge=1, description="G_a: answers sampled per prompt "
                                        "(turn 1); the GRPO group size.")
    num_generations_confidence: int = Field(2, ge=1, description="G_c: confidence completions "
                                            "sampled per answer (turn 2, in modes that have "
                                            "one).")
    reanswers_shown: int = Field(0, ge=0, description=REANSWERS_SHOWN_HELP)
    max_batch_size: int = Field(64, gt=0, description="Most sequences decoded at once (memory "
                                "bound of the transformers engine).")
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="vLLM's share of "
                                               "GPU memory when colocated with training.")

    @model_validator(mode="after")
    def _more_answers_than_shown(self) -> RolloutSection:
        check_reanswers_shown(self.reanswers_shown, self.num_generations_answer,
                              "num_generations_answer")
        return self


# The names `calibrl.algo` registers for `algorithm.loss_agg` (`calibrl.algo.aggregation`) and
# `algorithm.kl_estimator` (`calibrl.algo.kl`, aliases after their estimator), each with its
# help text. Settings may not import algo, so they are listed here once; tests/algo/
# test_registries.py checks that they are exactly the registered names.
LOSS_AGGREGATIONS: dict[str, str] = {
    "token_mean": "over all masked tokens of the batch (every token weighs the same)",
    "seq_mean_token_mean": "each row's mean, then the mean over rows (GRPO)",
    "seq_mean_token_sum_norm": "sum / (rows * max response length) (Dr. GRPO)",
}
KL_ESTIMATORS: dict[str, str] = {
    "k1": "d = logp - ref_logp", "kl": "same as k1", "abs": "|d|", "k2": "d^2 / 2",
    "mse": "same as k2", "k3": "exp(-d) + d - 1, clamped", "low_var_kl": "same as k3",
}


def _choices_help(choices: dict[str, str]) -> str:
    return "; ".join(f"{name}: {text}" for name, text in choices.items())


def one_of(names: Iterable[str], what: str) -> Callable[[str], str]:
    """A field validator accepting only `names`; anything else is a `ValueError` (a pydantic
    field error) that lists them."""
    allowed = tuple(names)

    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"unknown {what} {value!r}; choose one of {', '.join(allowed)}")
        return value
    return check


def known_mode(value: str) -> str:
    """The canonical name of a registered mode; `ValueError` (a pydantic field error) if none."""
    try:
        return get_mode(value).name
    except UserError as err:  # pydantic reports ValueErrors with the field's name
        raise ValueError(str(err)) from None


class AlgorithmSection(Section):
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
    loss_agg: str = Field("token_mean", description="Loss normalisation (calibrl.algo."
                          "aggregation): " + _choices_help(LOSS_AGGREGATIONS) + ".")
    kl_coef: float = Field(0.0, ge=0, description="KL penalty to the reference model; 0 loads "
                           "no reference model.")
    kl_coef_confidence: float | None = Field(None, ge=0, description="KL coefficient on "
                                             "confidence samples; None: kl_coef. 0 anchors "
                                             "only the answers, so the confidence can move "
                                             "freely (the reference model is loaded when "
                                             "either coefficient is above 0).")
    kl_estimator: str = Field("k3", description="KL estimator, by verl's names and clamps "
                              "(calibrl.algo.kl): " + _choices_help(KL_ESTIMATORS) + ".")
    ppo_epochs: int = Field(1, ge=1, description="Optimisation passes over each rollout; >1 "
                            "recomputes old log-probs with the pre-update policy.")

    _known_mode = field_validator("mode")(known_mode)
    _known_loss_agg = field_validator("loss_agg")(one_of(LOSS_AGGREGATIONS, "loss aggregation"))
    _known_kl_estimator = field_validator("kl_estimator")(one_of(KL_ESTIMATORS, "KL estimator"))

    @property
    def uses_reference(self) -> bool:
        """Whether any sample type carries a KL penalty (a reference model is needed)."""
        return self.kl_coef > 0 or (self.kl_coef_confidence or 0.0) > 0


class OptimSection(Section):
    lr: float = Field(1e-5, gt=0, description="Peak learning rate (AdamW).")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    betas: AdamBetas = Field((0.9, 0.999), description="AdamW betas.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    scheduler: Literal["constant", "constant_with_warmup", "linear", "cosine"] = Field(
        "constant_with_warmup", description="transformers learning-rate schedule.")
    warmup_steps: int = Field(0, ge=0, description="Warm-up optimiser steps.")
    total_steps: int = Field(100, gt=0, description="Training steps (one rollout each).")
    micro_batch_size: int = Field(16, gt=0, description="Rows per forward/backward; gradients "
                                  "accumulate over a step's micro-batches.")
    shared_context: bool = Field(False, description="Encode each distinct context (a prompt "
                                 "shared by its G_a answers, a confidence context by its G_c "
                                 "samples) once per micro-batch and run the responses on its "
                                 "KV cache: the same log-probs up to float rounding, for less "
                                 "compute. One process only, no gradient checkpointing (the "
                                 "model runs twice per micro-batch). Off by default: float "
                                 "rounding would change the demo's recorded numbers.")
    skip_rows_without_gradient: bool = Field(
        True, description="Leave out of the forward/backward the rows that cannot move the "
        "weights: every trained token's advantage is 0 (a group whose samples all scored the "
        "same) and the row has no KL term. The same update up to float rounding, for less "
        "compute; one process only (with several, every process runs every row). train/* "
        "metrics then average over the rows trained; train/rows_trained is their share.")
    mixed_precision: Literal["no", "bf16", "fp16"] | None = Field(
        None, description="accelerate mixed precision; None: the launcher's (`accelerate launch "
        "--mixed_precision`, `accelerate config`; 'no' without a launcher). A value here wins "
        "over the launcher's (under DeepSpeed its own config decides). bf16 autocast also "
        "speeds up CPUs with AVX512-BF16/AMX.")

    @field_validator("mixed_precision", mode="before")
    @classmethod
    def _yaml_no(cls, value: Any) -> Any:
        return "no" if value is False else value  # `mixed_precision: no` in a YAML file


class LoggingSection(Section):
    output_dir: str = Field("outputs", description="Parent folder of run directories.")
    run_name: str | None = Field(None, description="Run directory name; default: mode + time.")
    log_every: int = Field(1, gt=0, description="Steps between metric records.")
    tensorboard: bool = Field(True, description="Write TensorBoard event files.")
    wandb: bool = Field(False, description="Also log to Weights & Biases (extra `calibrl[wandb]`).")
    wandb_project: str = Field("calibrl", description="W&B project.")
    samples_every: int = Field(10, gt=0, description="Steps between sample-conversation tables.")
    num_samples: int = Field(3, ge=0, description="Conversations in each sample table.")


class CheckpointSection(Section):
    every: int = Field(20, gt=0, description="Steps between checkpoints.")
    keep_last: int = Field(2, ge=1, description="Checkpoints kept (older ones deleted).")
    resume: str | None = Field(None, description="'auto' (the newest intact checkpoint in the run "
                               "directory) or a checkpoint path to resume from.")
    overwrite: bool = Field(False, description="Replace a run directory that already holds a "
                            "run; the new run is written beside it and swapped in when done.")
    push_to_hub: str | None = Field(None, min_length=1, description="Hugging Face Hub repo id "
                                    "('user/name') that final-model and its tokenizer are "
                                    "pushed to when the run ends (needs `hf auth login`); "
                                    "None: nothing is pushed.")
