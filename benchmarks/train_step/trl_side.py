"""TRL's side of the train-step benchmark: `GRPOTrainer` set up like calibrl's `rlvr` step.

    python trl_side.py SPEC.json RESULT.json

One optimiser step of TRL = one generation of `prompts x group` completions (generation batch =
gradient-accumulation window), as in calibrl. A step is timed from `on_step_begin` to
`on_step_end` (so it holds generation, rewards, forward/backward, clipping and the optimiser
step, and not TRL's logging, which comes after); its generation part is the time spent in
`_generate_and_score_completions` (sampling, rewards, advantages), which matches what calibrl's
`time/rollout_s` covers.
"""

from __future__ import annotations

import sys
import time

import torch
from common import SideResult, Spec, StepTime, current_rss_mb, peak_rss_mb, versions
from datasets import load_dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from calibrl.rewards.trl_adapter import countdown_accuracy


def grpo_config(spec: Spec) -> GRPOConfig:
    """The TRL config matching `spec` (see `calibrl_side.overrides` for the other half).

    Explicit wherever TRL's default differs from calibrl's: gradient checkpointing (TRL: on),
    bf16 (TRL: on), optimiser (TRL: fused AdamW), loss (TRL: 'dapo' = calibrl's token_mean).
    """
    if spec.rows % spec.micro_batch:
        raise SystemExit(f"rows per step {spec.rows} must be a multiple of micro_batch "
                         f"{spec.micro_batch} (TRL's accumulation is whole micro-batches)")
    return GRPOConfig(
        output_dir=f"{spec.work_dir}/trl-side", seed=spec.seed, data_seed=spec.seed,
        use_cpu=not torch.cuda.is_available(), bf16=spec.precision == "bf16", fp16=False,
        model_init_kwargs={"dtype": torch.float32},
        per_device_train_batch_size=spec.micro_batch,
        gradient_accumulation_steps=spec.rows // spec.micro_batch,  # = steps_per_generation
        num_generations=spec.group, max_completion_length=spec.max_tokens,
        temperature=spec.temperature, top_p=1.0, top_k=0,
        num_iterations=1, beta=0.0, epsilon=0.2, loss_type="dapo", scale_rewards="group",
        learning_rate=spec.lr, lr_scheduler_type="constant", warmup_steps=0,
        optim="adamw_torch", weight_decay=0.0, max_grad_norm=1.0,
        gradient_checkpointing=False, use_vllm=False,
        max_steps=spec.warmup_steps + spec.steps,
        logging_steps=1, report_to="none", save_strategy="no", disable_tqdm=True,
        dataloader_num_workers=0, log_completions=False,
    )


class TimedGRPOTrainer(GRPOTrainer):
    """Records the wall and CPU time and the completion tokens of each generation (sampling,
    rewards, advantages)."""

    gen_times: list[float]
    gen_cpu_times: list[float]
    gen_tokens: list[int]

    def _generate_and_score_completions(self, inputs):
        start, start_cpu = time.perf_counter(), time.process_time()
        out = super()._generate_and_score_completions(inputs)
        self.gen_times.append(time.perf_counter() - start)
        self.gen_cpu_times.append(time.process_time() - start_cpu)
        self.gen_tokens.append(int(out["completion_mask"].sum()))
        return out


class StepClock(TrainerCallback):
    def __init__(self) -> None:
        self.begin = self.begin_cpu = 0.0
        self.step_times: list[float] = []
        self.cpu_times: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.begin, self.begin_cpu = time.perf_counter(), time.process_time()

    def on_step_end(self, args, state, control, **kwargs):
        self.step_times.append(time.perf_counter() - self.begin)
        self.cpu_times.append(time.process_time() - self.begin_cpu)


def main(spec_path: str, out_path: str) -> None:
    spec = Spec.load(spec_path)
    torch.set_num_threads(spec.threads)
    dataset = load_dataset("parquet", data_files=spec.train_path, split="train")
    clock = StepClock()
    trainer = TimedGRPOTrainer(model=spec.model_dir, reward_funcs=countdown_accuracy,
                               args=grpo_config(spec), train_dataset=dataset, callbacks=[clock])
    trainer.gen_times, trainer.gen_cpu_times, trainer.gen_tokens = [], [], []
    result = SideResult(side="trl", warmup_steps=spec.warmup_steps,
                        rss_before_mb=current_rss_mb(),
                        versions=versions("torch", "transformers", "accelerate", "trl"))
    trainer.train()
    if not len(clock.step_times) == len(trainer.gen_times) == spec.warmup_steps + spec.steps:
        raise SystemExit(f"expected one generation per step, got {len(trainer.gen_times)} "
                         f"generations in {len(clock.step_times)} steps")
    for step_s, cpu_s, gen_s, gen_cpu_s, tokens in zip(
            clock.step_times, clock.cpu_times, trainer.gen_times, trainer.gen_cpu_times,
            trainer.gen_tokens, strict=True):
        result.steps.append(StepTime(step_s=step_s, gen_s=gen_s, train_s=step_s - gen_s,
                                     gen_tokens=tokens, step_cpu_s=cpu_s, gen_cpu_s=gen_cpu_s))
    result.peak_rss_mb = peak_rss_mb()
    result.threads = torch.get_num_threads()
    result.save(out_path)


if __name__ == "__main__":
    main(*sys.argv[1:3])
