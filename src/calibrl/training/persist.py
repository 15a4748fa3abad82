"""What an RL run keeps on disk: its folder, a checkpoint per `checkpoint.every` steps, the
resume from one, the final model, and the push of that model to the Hub.

One process writes calibrl's checkpoint (`calibrl.training.checkpoint`: model, optimiser,
scheduler, data position, RNGs). Several processes, or sharded ones, write the same folder with
the optimiser, scheduler and RNGs of every process in `accelerate/` (accelerate's `save_state`,
sharded under FSDP / DeepSpeed), and resume from it with `load_state`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accelerate import Accelerator

from calibrl.errors import UserError
from calibrl.models.adapters import final_model, load_trained_weights
from calibrl.settings import TrainSettings, dump_settings
from calibrl.training.build import Policy
from calibrl.training.checkpoint import Checkpoint, save_checkpoint, set_rng_state
from calibrl.training.distributed import (
    gathered_state_dict,
    is_sharded,
    save_processes_state,
    saves_processes_state,
)
from calibrl.training.prompt_sampler import PromptSampler
from calibrl.training.run_setup import default_run_dir, open_checkpointed_run
from calibrl.training.update import max_abs_weight, stop_if_non_finite
from calibrl.utils.atomic import atomic_dir, atomic_write_text
from calibrl.utils.run_dir import RunDir

# What makes a folder hold a training run (besides checkpoints).
RUN_MARKERS = ("config.yaml", "metrics.jsonl", "final-model")


def run_directory(cfg: TrainSettings) -> Path:
    """The run's folder when the caller names none (`calibrl.training.run_setup`)."""
    return default_run_dir(Path(cfg.logging.output_dir), cfg.algorithm.mode,
                           cfg.logging.run_name, cfg.checkpoint.resume)


def open_run(accelerator: Accelerator, cfg: TrainSettings, final: Path
             ) -> tuple[RunDir, Checkpoint | None]:
    """Lock the run folder and find the checkpoint to continue from (None: a fresh start). The
    main process locks and cleans the folder first; the others then see it as it is."""
    options = dict(resume=cfg.checkpoint.resume, overwrite=cfg.checkpoint.overwrite,
                   markers=RUN_MARKERS)
    opened = open_checkpointed_run(final, **options) if accelerator.is_main_process else None
    accelerator.wait_for_everyone()
    return opened or open_checkpointed_run(final, main=False, **options)


def write_config(cfg: TrainSettings, run: RunDir) -> None:
    """config.yaml: the resolved settings (main process)."""
    atomic_write_text(run.work / "config.yaml", dump_settings(cfg))
    print(f"run directory: {run.final} (config.yaml, metrics.jsonl, tensorboard/, "
          "checkpoint-*/, final-model/)")


def resume(ckpt: Checkpoint, policy: Policy, sampler: PromptSampler) -> int:
    """Restore weights, optimiser, scheduler, RNGs and data position; returns the step."""
    accelerator = policy.accelerator
    state = ckpt.load_state()
    if ckpt.accelerate_dir is not None:
        # What every process saved: weights (or shards), optimiser, scheduler, its RNGs.
        accelerator.load_state(str(ckpt.accelerate_dir))
    elif is_sharded(accelerator):
        raise UserError(f"{ckpt.path} was written by a single process; a sharded run "
                        "resumes only from its own checkpoints")
    else:
        load_trained_weights(policy.unwrapped(), ckpt.model_dir)
        policy.optimizer.load_state_dict(state["optimizer"])
        policy.scheduler.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
    sampler.load_state_dict(state["data"])
    return ckpt.step


def save(policy: Policy, sampler: PromptSampler, run_dir: Path, step: int, keep_last: int
         ) -> None:
    """Checkpoint `step` (all processes take part); refused if a weight is non-finite."""
    accelerator = policy.accelerator
    accelerator.wait_for_everyone()
    stop_if_non_finite(accelerator, {"weight": max_abs_weight(policy.model)}, step=step,
                       run_dir=run_dir)
    model_state = gathered_state_dict(accelerator, policy.model)
    state_dir = (save_processes_state(accelerator, run_dir, step)
                 if saves_processes_state(accelerator) else None)
    if accelerator.is_main_process:
        trainer_state: dict[str, Any] = {"data": sampler.state_dict()}
        if state_dir is None:
            trainer_state = {"optimizer": policy.optimizer.state_dict(),
                             "scheduler": policy.scheduler.state_dict(), **trainer_state}
        save_checkpoint(run_dir, step, model=policy.unwrapped(), tokenizer=policy.tokenizer,
                        keep_last=keep_last, trainer_state=trainer_state,
                        model_state=model_state, state_dir=state_dir)
    accelerator.wait_for_everyone()


def save_final_model(policy: Policy, run: RunDir) -> Any | None:
    """Write final-model (with LoRA: merged into the base) and commit the run folder; returns
    the saved model on the main process (None on the others), e.g. to push it."""
    accelerator = policy.accelerator
    model_state = gathered_state_dict(accelerator, policy.model)
    model = None
    if accelerator.is_main_process:
        model = final_model(policy.unwrapped())
        with atomic_dir(run.work / "final-model") as tmp:
            model.save_pretrained(tmp, state_dict=model_state)
            policy.tokenizer.save_pretrained(tmp)
        run.commit()
        print(f"final model: {run.final / 'final-model'}")
    accelerator.wait_for_everyone()
    return model


def push_to_hub(model: Any, tokenizer: Any, repo_id: str, saved: Path) -> None:
    """Push the final model and tokenizer; the run is complete on disk whatever happens."""
    try:
        model.push_to_hub(repo_id)
        tokenizer.push_to_hub(repo_id)
    except Exception as err:  # login, network or permission errors of huggingface_hub
        raise UserError(f"pushing the final model to the Hub repo {repo_id!r} failed "
                        f"({str(err).splitlines()[0] if str(err) else type(err).__name__}); "
                        f"it is saved in {saved}") from None
    print(f"pushed the final model to https://huggingface.co/{repo_id}")
