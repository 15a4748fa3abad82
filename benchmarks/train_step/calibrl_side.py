"""calibrl's side of the train-step benchmark: `Trainer.train_step()` in `rlvr` mode.

    python calibrl_side.py SPEC.json RESULT.json

The trainer times itself: `time/rollout_s` (sampling + rewards) and `time/train_s` (batch,
log-probs, loss, backward, optimiser step) add up to `time/step_s`. CPU time is taken around
`train_step` and around `Trainer._rollout`, the part `time/rollout_s` covers. For the breakdown,
wall time is also taken around the scoring (`score_tree`, inside the rollout) and around
gradient clipping + optimiser + scheduler step (inside `time/train_s`).
"""

from __future__ import annotations

import sys
import time

import torch
from common import SideResult, Spec, StepTime, current_rss_mb, peak_rss_mb, versions

import calibrl.training.trainer as trainer_module
from calibrl.settings import TrainSettings, load_settings
from calibrl.training.trainer import Trainer


def overrides(spec: Spec) -> list[str]:
    """The calibrl config matching `spec` (see `trl_side.grpo_config` for the other half)."""
    total = spec.warmup_steps + spec.steps
    return [
        f"seed={spec.seed}",
        f"model.path={spec.model_dir}", "model.dtype=float32",
        f"data.train_path={spec.train_path}", "data.shuffle=true",
        "rollout.engine=hf", f"rollout.prompts_per_step={spec.prompts}",
        f"rollout.num_generations_answer={spec.group}",
        f"rollout.temperature={spec.temperature}", "rollout.top_p=1.0", "rollout.top_k=0",
        f"rollout.max_answer_tokens={spec.max_tokens}",
        f"rollout.max_batch_size={max(spec.rows, 1)}",  # the whole step in one decode batch
        "algorithm.mode=rlvr", "algorithm.kl_coef=0.0", "algorithm.ppo_epochs=1",
        "algorithm.loss_agg=token_mean", "algorithm.clip_low=0.2", "algorithm.clip_high=0.2",
        "algorithm.normalize_std=true",
        f"optim.lr={spec.lr}", "optim.scheduler=constant", "optim.warmup_steps=0",
        f"optim.total_steps={total}", f"optim.micro_batch_size={spec.micro_batch}",
        f"optim.shared_context={str(spec.shared_context).lower()}",
        f"optim.skip_rows_without_gradient={str(spec.skip_rows).lower()}",
        "optim.max_grad_norm=1.0", "optim.weight_decay=0.0",
        f"optim.mixed_precision={'bf16' if spec.precision == 'bf16' else 'no'}",
        f"logging.output_dir={spec.work_dir}", "logging.run_name=calibrl-side",
        "logging.tensorboard=false", f"logging.log_every={10**9}",  # no logging inside steps
        f"logging.samples_every={10**9}", "logging.num_samples=0",
        f"checkpoint.every={10**9}",
    ]


def time_calls(owner, name: str, times: list[float], clock=time.perf_counter) -> None:
    """Replace `owner.name` with a wrapper that appends each call's duration on `clock` to
    `times`."""
    fn = getattr(owner, name)

    def timed(*args, **kwargs):
        start = clock()
        out = fn(*args, **kwargs)
        times.append(clock() - start)
        return out

    setattr(owner, name, timed)


def main(spec_path: str, out_path: str) -> None:
    spec = Spec.load(spec_path)
    torch.set_num_threads(spec.threads)
    trainer = Trainer(load_settings(TrainSettings, None, overrides(spec)))
    gen_cpu: list[float] = []
    time_calls(trainer, "_rollout", gen_cpu, clock=time.process_time)
    score_times: list[float] = []
    optimizer_times: list[float] = []
    time_calls(trainer_module, "score_tree", score_times)
    time_calls(trainer.accelerator, "clip_grad_norm_", optimizer_times)
    time_calls(trainer.optimizer, "step", optimizer_times)
    time_calls(trainer.scheduler, "step", optimizer_times)
    result = SideResult(side="calibrl", warmup_steps=spec.warmup_steps,
                        rss_before_mb=current_rss_mb(),
                        versions=versions("torch", "transformers", "accelerate", "calibrl"))
    for _ in range(spec.warmup_steps + spec.steps):
        cpu = time.process_time()
        score_times.clear()
        optimizer_times.clear()
        m = trainer.train_step()
        cpu = time.process_time() - cpu
        tokens = round(m["answer/length_mean"] * m["answer/count"])
        result.steps.append(StepTime(step_s=m["time/step_s"], gen_s=m["time/rollout_s"],
                                     train_s=m["time/train_s"], gen_tokens=tokens,
                                     step_cpu_s=cpu, gen_cpu_s=gen_cpu[-1],
                                     score_s=sum(score_times),
                                     optimizer_s=sum(optimizer_times),
                                     rows_trained=m["train/rows_trained"]))
    result.peak_rss_mb = peak_rss_mb()
    result.threads = torch.get_num_threads()
    result.save(out_path)


if __name__ == "__main__":
    main(*sys.argv[1:3])
