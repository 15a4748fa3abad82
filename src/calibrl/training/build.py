"""What a run is built from: the start-up checks, the training rows, the policy (model,
optimiser, scheduler, prepared by accelerate), the frozen reference model and the engine.

The trainer seeds before `build_policy`, and the policy is built in one fixed order (model,
optimiser, scheduler, FSDP's generation copy, reference, engine), so a run and the run that
resumes it start from the same objects.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from transformers import get_scheduler

from calibrl.data import TaskExample
from calibrl.errors import UserError, no_rows
from calibrl.models.adapters import prepare_policy, require_peft, trainable_parameters
from calibrl.models.loading import load_policy, resolve_model_path
from calibrl.rollout.engine import Engine
from calibrl.rollout.factory import make_engine
from calibrl.settings import TrainSettings
from calibrl.tasks import get_task, import_task_modules
from calibrl.tasks.files import load_examples
from calibrl.training.distributed import (
    check_launch,
    full_weights,
    generation_copy,
    is_sharded,
    refresh_copy,
    shard_bounds,
)


def check_setup(cfg: TrainSettings, accelerator: Accelerator) -> tuple[int, int]:
    """Refuse what this launch cannot run, before anything slow; returns this process's share
    `[lo, hi)` of a step's prompts (refused when the processes do not divide them evenly)."""
    check_launch(accelerator)
    if is_sharded(accelerator) and cfg.model.lora.r > 0:
        raise UserError("model.lora with FSDP or DeepSpeed is not supported; use DDP")
    if cfg.optim.shared_context and (accelerator.num_processes > 1
                                     or cfg.model.gradient_checkpointing):
        raise UserError("optim.shared_context runs the model twice per micro-batch, which "
                        "needs one process and no gradient checkpointing")
    if cfg.model.lora.r > 0:
        require_peft()  # before minutes of loading
    return shard_bounds(cfg.rollout.prompts_per_step, accelerator.process_index,
                        accelerator.num_processes)


def load_training_examples(cfg: TrainSettings) -> list[TaskExample]:
    """The training rows; each row's task must be known now, not at step 1."""
    import_task_modules(cfg.data.task_modules)
    examples = load_examples(cfg.data.train_path)
    if not examples:
        raise no_rows(cfg.data.train_path)
    for source in {ex.data_source for ex in examples}:
        get_task(source)
    return examples


@dataclass
class Policy:
    """The trained model and what moves it, and the models beside it.

    `model`, `optimizer` and `scheduler` are as accelerate prepared them (wrapped by DDP, FSDP or
    DeepSpeed when launched so); `generation_model` is FSDP's whole copy the engine generates
    with (None otherwise); `ref_model` the frozen initial model of the KL term (None without).
    """

    accelerator: Accelerator
    model: Any
    tokenizer: Any
    optimizer: Any
    scheduler: Any
    ref_model: Any | None
    generation_model: Any | None

    def unwrapped(self) -> Any:
        return self.accelerator.unwrap_model(self.model)

    def for_engine(self) -> Any:
        """The model the engine generates with."""
        return self.unwrapped() if self.generation_model is None else self.generation_model

    def sync_engine(self, engine: Engine) -> None:
        """Hand the current weights to `engine` (after an update or a resume)."""
        if self.generation_model is not None:
            refresh_copy(self.model, self.generation_model)
        engine.update_weights(self.for_engine())

    def generating(self) -> contextlib.AbstractContextManager:
        """Whole weights for the engine while it generates (a collective under ZeRO-3)."""
        if self.generation_model is not None:
            return contextlib.nullcontext(self.generation_model)
        return full_weights(self.accelerator, self.model)


def build_policy(cfg: TrainSettings, accelerator: Accelerator, run_dir: Path) -> Policy:
    """Load the model (`model.gradient_checkpointing` and `model.lora` applied), give it AdamW
    and the learning-rate schedule, and prepare them; the schedule counts optimiser steps, one
    per pass, so `optim.total_steps` and `optim.warmup_steps` are scaled by `ppo_epochs`."""
    with accelerator.main_process_first():  # 'tiny' is built (a Hub model fetched) once
        model_path = resolve_model_path(cfg.model.path, run_dir)
    model, tokenizer = load_policy(model_path, dtype=cfg.model.dtype,
                                   trust_remote_code=cfg.model.trust_remote_code)
    model = prepare_policy(model, gradient_checkpointing=cfg.model.gradient_checkpointing,
                           lora=cfg.model.lora, train_layers=cfg.model.train_layers)
    optim, epochs = cfg.optim, cfg.algorithm.ppo_epochs
    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=optim.lr,
                                  betas=optim.betas, weight_decay=optim.weight_decay)
    scheduler = get_scheduler(optim.scheduler, optimizer,
                              num_warmup_steps=optim.warmup_steps * epochs,
                              num_training_steps=optim.total_steps * epochs)
    generation_model = generation_copy(accelerator, model)  # FSDP only
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    ref_model = build_reference(cfg, model_path, accelerator)
    return Policy(accelerator, model, tokenizer, optimizer, scheduler, ref_model,
                  generation_model)


def build_reference(cfg: TrainSettings, model_path: Path | str, accelerator: Accelerator
                    ) -> Any | None:
    """The frozen initial model of the KL term; None when no sample type has a KL penalty."""
    if not cfg.algorithm.uses_reference:
        return None
    ref, _ = load_policy(model_path, dtype=cfg.model.dtype,
                         trust_remote_code=cfg.model.trust_remote_code)
    # Not prepared: accelerate never shards a model prepared for evaluation, and would put it
    # in save_state, which under FSDP fails on an unwrapped module. Every process holds the
    # whole frozen reference on its device.
    return ref.eval().requires_grad_(False).to(accelerator.device)


def build_engine(cfg: TrainSettings, policy: Policy) -> Engine:
    """The configured generation engine (`rollout.engine`) on the policy's weights."""
    rollout = cfg.rollout
    options = ({"gpu_memory_utilization": rollout.vllm_gpu_memory_utilization}
               if rollout.engine == "vllm"
               else {"max_batch_size": rollout.max_batch_size, "decode": rollout.decode})
    return make_engine(rollout.engine, policy.for_engine(), policy.tokenizer, **options)
