"""The RL loop, read top to bottom: take the next prompts -> roll out (answers, and confidences
in the two-turn mode) -> score -> advantages -> update the policy -> hand the weights to the
engine -> log (and evaluate held-out problems when due) -> checkpoint every `checkpoint.every`
steps -> save final-model. A stop signal (SIGTERM, SIGINT, SIGUSR1) ends the run after the step
in flight with that step checkpointed (`calibrl.training.preemption`).

Building the run is `calibrl.training.build`, the update `calibrl.training.update`, and what
the run keeps on disk `calibrl.training.persist`; docs/architecture-training.md says what a step
does and why. The same code runs on CPU, one GPU or N processes (accelerate).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from tqdm.auto import tqdm

from calibrl.algo import build_train_batch, histogram_values, rollout_stats, score_tree
from calibrl.rollout.rollouts import RolloutSettings, run_rollout
from calibrl.rollout.sampling import step_seed
from calibrl.settings import TrainSettings
from calibrl.training import persist
from calibrl.training.build import (
    build_engine,
    build_policy,
    check_setup,
    load_training_examples,
)
from calibrl.training.distributed import gather_trees, record_launch
from calibrl.training.held_out import Evaluator, load_held_out
from calibrl.training.metrics_log import MetricsLogger
from calibrl.training.preemption import StopRequests, checkpoint_step
from calibrl.training.prompt_sampler import PromptSampler
from calibrl.training.run_setup import closing_run
from calibrl.training.samples import sample_rows
from calibrl.training.update import update_policy


class Trainer:
    """Two-turn RLCR, single-turn RLCR or RLVR training from one `TrainSettings`."""

    # The policy's parts under the names callers (tests, benchmarks) reach for.
    model = property(lambda self: self.policy.model)
    tokenizer = property(lambda self: self.policy.tokenizer)
    optimizer = property(lambda self: self.policy.optimizer)
    scheduler = property(lambda self: self.policy.scheduler)

    def __init__(self, cfg: TrainSettings, run_dir: Path | None = None, engine: Any = None,
                 evaluator: Evaluator | None = None) -> None:
        """`engine` overrides the configured one (tests inject scripted engines); `evaluator`
        scores held-out problems when `data.eval_path` is set (`calibrl.training.held_out`)."""
        self.cfg = cfg
        # None: the launcher's precision (`accelerate launch --mixed_precision`, `accelerate
        # config`); an explicit value wins over it.
        self.accelerator = Accelerator(mixed_precision=cfg.optim.mixed_precision)
        self.is_main = self.accelerator.is_main_process
        self.shard = check_setup(cfg, self.accelerator)  # this process's prompts [lo, hi)
        set_seed(cfg.seed)
        # Before anything slow, so a bad path or a busy directory fails at start-up.
        self.run, self.resume_from = persist.open_run(self.accelerator, cfg,
                                                      run_dir or persist.run_directory(cfg))
        self.run_dir = self.run.work
        try:
            record_launch(self.accelerator, self.run_dir)  # world size, precision: said and kept
            self.examples = load_training_examples(cfg)
            self.held_out = load_held_out(cfg, evaluator)  # an empty file fails before the model
            self.policy = build_policy(cfg, self.accelerator, self.run_dir)
            self.engine = engine or build_engine(cfg, self.policy)
            # Global: every process draws the same indices and rolls out its `shard` of them.
            self.sampler = PromptSampler(len(self.examples), cfg.seed, cfg.data.shuffle)
            self.settings = RolloutSettings.from_config(cfg.rollout, cfg.model, cfg.data)
        except BaseException:
            self.run.close(failed=True)
            raise
        self.step = 0

    def _unwrapped(self) -> Any:
        return self.policy.unwrapped()

    # ------------------------------------------------------------------ the run
    def train(self) -> Path:
        """Run to `optim.total_steps`; returns the directory of the final Hugging Face model."""
        with closing_run(self.run, main=self.is_main):
            final_model = self._train()
        final = self.run.final / "final-model"
        if self.is_main and self.cfg.checkpoint.push_to_hub:
            persist.push_to_hub(final_model, self.tokenizer, self.cfg.checkpoint.push_to_hub,
                                final)
        return final

    def _train(self) -> Any:
        cfg = self.cfg
        if self.is_main:
            persist.write_config(cfg, self.run)
        if self.resume_from is not None:
            self.step = persist.resume(self.resume_from, self.policy, self.sampler)
            self.policy.sync_engine(self.engine)
            if self.is_main:
                print(f"resumed from {self.resume_from.path} (step {self.step})")
        self.logger = MetricsLogger(self.run_dir, tensorboard=cfg.logging.tensorboard and
                                    self.is_main, wandb=cfg.logging.wandb and self.is_main,
                                    wandb_project=cfg.logging.wandb_project,
                                    run_name=self.run.final.name, config=cfg.model_dump(),
                                    resume_step=self.resume_from.step if self.resume_from else None)
        bar = tqdm(total=cfg.optim.total_steps, initial=self.step, desc=cfg.algorithm.mode,
                   disable=not self.is_main, dynamic_ncols=True)
        # A stop signal ends the run after the step in flight, checkpointed (`preemption`).
        with StopRequests(announce=self.is_main) as stop:
            try:
                while self.step < cfg.optim.total_steps:
                    metrics = self.train_step()
                    bar.update(1)
                    bar.set_postfix(acc=f"{metrics.get('answer/accuracy', 0):.2f}",
                                    conf=f"{metrics.get('calibration/confidence_mean', 0):.2f}")
                    last = self.step == cfg.optim.total_steps
                    checkpoint_step(stop, self.accelerator, step=self.step, last=last,
                                    due=last or self.step % cfg.checkpoint.every == 0,
                                    save=self.save)
            finally:
                bar.close()
                self.logger.close()
            return persist.save_final_model(self.policy, self.run)

    def save(self) -> None:
        """Checkpoint the current step (`calibrl.training.persist.save`)."""
        persist.save(self.policy, self.sampler, self.run_dir, self.step,
                     self.cfg.checkpoint.keep_last)

    # ------------------------------------------------------------------ one step
    def train_step(self) -> dict[str, float]:
        self.step += 1
        start = time.perf_counter()
        tree, batch_examples = self._rollout()
        rollout_s = time.perf_counter() - start
        algo = self.cfg.algorithm
        batch = build_train_batch(tree, self.tokenizer, lambda_ans=algo.lambda_ans,
                                  lambda_conf=algo.lambda_conf,
                                  confidence_level=algo.confidence_level,
                                  normalize_std=algo.normalize_std,
                                  confidence_std_scope=algo.confidence_std_scope, eps=algo.eps)
        metrics = {**rollout_stats(tree), **update_policy(
            self.policy, batch, self.cfg, shard=self.shard, step=self.step,
            max_len=self.settings.max_response_tokens(algo.mode), run_dir=self.run_dir)}
        self.policy.sync_engine(self.engine)
        step_s = time.perf_counter() - start
        tokens = int(batch.response_mask.sum())
        metrics.update({"time/rollout_s": rollout_s, "time/train_s": step_s - rollout_s,
                        "time/step_s": step_s, "time/tokens_per_s": tokens / step_s})
        if self.held_out is not None and self.held_out.due(self.step):
            metrics.update(self._evaluate_held_out())
        self._log(metrics, tree, batch_examples)
        return metrics

    def _rollout(self):
        """The step's whole scored tree (every process's share) and its examples."""
        batch_examples = [self.examples[i] for i in self.sampler.next(
            self.cfg.rollout.prompts_per_step)]
        lo, hi = self.shard
        # One seed per step for all processes; the streams are numbered from the share's first
        # prompt, so a sample is the same whichever process draws it.
        seed = step_seed(self.cfg.seed, self.step)
        self.model.eval()
        with torch.no_grad(), self.accelerator.autocast(), self.policy.generating():
            tree = run_rollout(self.engine, self.tokenizer, batch_examples[lo:hi], self.settings,
                               self.cfg.algorithm.mode, seed, first_prompt=lo)
        return gather_trees(self.accelerator, score_tree(tree)), batch_examples

    def _evaluate_held_out(self) -> dict[str, float]:
        """On the main process; the others only join the gathering of the weights."""
        self.model.eval()
        with torch.no_grad(), self.accelerator.autocast(), self.policy.generating() as model:
            if not self.is_main:
                return {}
            return self.held_out.run(model, self.tokenizer, self.engine)

    def _log(self, metrics: dict[str, float], tree, batch_examples) -> None:
        if not self.is_main:
            return
        if self.step % self.cfg.logging.log_every == 0 or "time/eval_s" in metrics:
            self.logger.log(self.step, metrics)
            for name, values in histogram_values(tree).items():
                self.logger.histogram(self.step, name, values)
        if self.step % self.cfg.logging.samples_every == 0 and self.cfg.logging.num_samples:
            self.logger.samples(self.step, sample_rows(tree, batch_examples,
                                                       self.cfg.logging.num_samples))
