"""The RL loop. One step: take the next prompts -> roll out (answers, and confidences in the
two-turn mode) -> score -> advantages -> `ppo_epochs` passes over the batch in micro-batches,
each pass ending with one optimiser and one scheduler step -> hand the weights to the engine
-> log -> checkpoint every `checkpoint.every` steps.

The clipped policy-gradient loss compares with the log-probs of the policy before the step:
with one pass they are the current ones detached (ratio 1, TRL's convention), with more they
are computed once before the first pass. With `kl_coef > 0` a frozen copy of the initial
model gives the reference log-probs of the KL term. `model.gradient_checkpointing` and
`model.lora` change the policy before training (`calibrl.models.adapters`; with LoRA only the
adapter trains and final-model is saved merged); `checkpoint.push_to_hub` pushes final-model
once the run is complete on disk. With `data.eval_path`, every `eval.every_steps` steps (and at
the last) the main process scores held-out problems with an evaluator handed in by the caller
(`calibrl.training.held_out`) and logs them as `eval/*` with that step's metrics.

Everything algorithmic is a call into `calibrl.algo` / `calibrl.rollout`; this module wires them
with accelerate (device placement, mixed precision, gradient reduction), so the same code runs on
CPU, one GPU, or N processes (the README's multi-process section has the launch commands).
`rollout.prompts_per_step` is global: each process rolls out `prompts_per_step / N` of the same
prompts (refused at start-up when N does not divide it) and the scored shards are gathered on
every process (`calibrl.training.distributed`), so advantages, loss weights and logged metrics
are those of the whole batch. A micro-batch's loss is weighted by its share of the global batch,
gradients are reduced once per pass (`no_sync` before the last micro-batch), and the update is
the one a single process would make. Checked on 2 CPU processes (DDP over gloo,
`tests/training/test_multi_process.py`, slow): after 3 steps the ranks hold identical weights,
equal within float tolerance to a 1-process run, with one gradient reduction per pass; killed
after a checkpoint they resume to the uninterrupted run's weights bitwise. `optim.mixed_precision`
None takes the launcher's precision; a value wins over it. Under DeepSpeed ZeRO-3 the rollout
gathers the parameters, under FSDP (v1) it generates with a full copy refreshed after each step
(the copy is tested on 2 CPU ranks; FSDP training and resume ran on one H100, unsharded as
one process is, benchmarks/gpu; DeepSpeed has not run).
Checkpoints of several or sharded processes add accelerate's `save_state` (see `save`).

Durability (see `run_setup`): the run directory is locked to this process; one that already holds
a run is continued only with `checkpoint.resume` and replaced only with `checkpoint.overwrite`
(written beside it, swapped in at the end). A non-finite loss, gradient norm or weight stops the
run with a `UserError` before it reaches the weights or a checkpoint, so the last checkpoint is
the last good state.

Randomness: a step's sampling seed is derived from `(seed, step)` (`step_seed`), the random stream
of a sample from its prompt's position in the global batch, and the prompts from the seeded data
order and position (`PromptSampler`), so a run resumed from a checkpoint continues exactly as the
uninterrupted run would have, and a sample does not depend on which process drew it.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from tqdm.auto import tqdm
from transformers import get_scheduler

from calibrl.algo import build_train_batch, histogram_values, rollout_stats, score_tree
from calibrl.algo.policy_loss import micro_batch_weight, policy_loss, row_kl_coef
from calibrl.errors import UserError
from calibrl.models.adapters import (
    final_model,
    load_trained_weights,
    prepare_policy,
    require_peft,
    trainable_parameters,
)
from calibrl.models.loading import load_policy, resolve_model_path
from calibrl.rollout.factory import make_engine
from calibrl.rollout.rollouts import RolloutSettings, run_rollout
from calibrl.rollout.sampling import step_seed
from calibrl.settings import TrainSettings, dump_settings
from calibrl.tasks import get_task, import_task_modules
from calibrl.tasks.files import load_examples
from calibrl.training.checkpoint import list_checkpoints, save_checkpoint, set_rng_state
from calibrl.training.distributed import (
    check_launch,
    full_weights,
    gather_each,
    gather_trees,
    gathered_state_dict,
    generation_copy,
    is_sharded,
    refresh_copy,
    save_processes_state,
    saves_processes_state,
    shard_bounds,
)
from calibrl.training.held_out import Evaluator, load_held_out
from calibrl.training.metrics_log import MetricsLogger
from calibrl.training.policy import token_logprobs
from calibrl.training.prompt_sampler import PromptSampler
from calibrl.training.run_setup import default_run_dir, open_checkpointed_run
from calibrl.training.samples import sample_rows
from calibrl.utils.atomic import atomic_dir, atomic_write_text

# What makes a folder hold a training run (besides checkpoints).
RUN_MARKERS = ("config.yaml", "metrics.jsonl", "final-model")


def run_directory(cfg: TrainSettings) -> Path:
    return default_run_dir(Path(cfg.logging.output_dir), cfg.algorithm.mode,
                           cfg.logging.run_name, cfg.checkpoint.resume)


@dataclass
class _Accumulated:
    """Metrics averaged over a step's micro-batches, weighted by their loss weight."""

    sums: dict[str, float] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)

    def add(self, metrics: dict[str, float], weight: float) -> None:
        for key, value in metrics.items():
            self.sums[key] = self.sums.get(key, 0.0) + value * weight
            self.weights[key] = self.weights.get(key, 0.0) + weight

    def means(self) -> dict[str, float]:
        return {k: self.sums[k] / self.weights[k] for k in self.sums if self.weights[k] > 0}

    @classmethod
    def merged(cls, parts: list[_Accumulated]) -> _Accumulated:
        """The processes' accumulations as one (weights are shares of the global batch)."""
        out = cls()
        for part in parts:
            for key, total in part.sums.items():
                out.sums[key] = out.sums.get(key, 0.0) + total
                out.weights[key] = out.weights.get(key, 0.0) + part.weights[key]
        return out


class Trainer:
    """Two-turn RLCR, single-turn RLCR or RLVR training from one `TrainSettings`."""

    def __init__(self, cfg: TrainSettings, run_dir: Path | None = None, engine: Any = None,
                 evaluator: Evaluator | None = None) -> None:
        """`engine` overrides the configured one (tests inject scripted engines); `evaluator`
        scores held-out problems when `data.eval_path` is set (`calibrl.training.held_out`)."""
        self.cfg = cfg
        # None: the launcher's precision (`accelerate launch --mixed_precision`, `accelerate
        # config`); an explicit value wins over it.
        self.accelerator = Accelerator(mixed_precision=cfg.optim.mixed_precision)
        self.is_main = self.accelerator.is_main_process
        check_launch(self.accelerator)
        if is_sharded(self.accelerator) and cfg.model.lora.r > 0:
            raise UserError("model.lora with FSDP or DeepSpeed is not supported; use DDP")
        if cfg.optim.shared_context and (self.accelerator.num_processes > 1
                                         or cfg.model.gradient_checkpointing):
            raise UserError("optim.shared_context runs the model twice per micro-batch, which "
                            "needs one process and no gradient checkpointing")
        # This process's share of a step's prompts; refused now if they do not divide evenly.
        self.shard = shard_bounds(cfg.rollout.prompts_per_step, self.accelerator.process_index,
                                  self.accelerator.num_processes)
        set_seed(cfg.seed)
        # Checked before anything slow, so a bad path or a busy directory fails at start-up.
        self.run, self.resume_from = self._open_run(run_dir or run_directory(cfg))
        self.run_dir = self.run.work
        try:
            self._build(cfg, engine)
            self.held_out = load_held_out(cfg, evaluator)
        except BaseException:
            self.run.close(failed=True)
            raise

    def _open_run(self, final: Path):
        """The main process locks and cleans the folder first; the others then see it as is."""
        options = dict(resume=self.cfg.checkpoint.resume, overwrite=self.cfg.checkpoint.overwrite,
                       markers=RUN_MARKERS)
        opened = open_checkpointed_run(final, **options) if self.is_main else None
        self.accelerator.wait_for_everyone()
        return opened or open_checkpointed_run(final, main=False, **options)

    def _build(self, cfg: TrainSettings, engine: Any) -> None:
        import_task_modules(cfg.data.task_modules)
        if cfg.model.lora.r > 0:
            require_peft()  # before minutes of loading
        self.examples = load_examples(cfg.data.train_path)
        if not self.examples:
            raise UserError(f"{cfg.data.train_path}: no training rows")
        for source in {ex.data_source for ex in self.examples}:
            get_task(source)  # unknown data_source: fail now, not at step 1
        with self.accelerator.main_process_first():  # 'tiny' is built (a Hub model fetched) once
            model_path = resolve_model_path(cfg.model.path, self.run_dir)
        model, self.tokenizer = load_policy(model_path, dtype=cfg.model.dtype,
                                            trust_remote_code=cfg.model.trust_remote_code)
        model = prepare_policy(model, gradient_checkpointing=cfg.model.gradient_checkpointing,
                               lora=cfg.model.lora)
        optim = cfg.optim
        optimizer = torch.optim.AdamW(trainable_parameters(model), lr=optim.lr,
                                      betas=optim.betas, weight_decay=optim.weight_decay)
        passes = optim.total_steps * cfg.algorithm.ppo_epochs
        scheduler = get_scheduler(optim.scheduler, optimizer,
                                  num_warmup_steps=optim.warmup_steps * cfg.algorithm.ppo_epochs,
                                  num_training_steps=passes)
        self.generation_model = generation_copy(self.accelerator, model)  # FSDP only
        self.model, self.optimizer, self.scheduler = self.accelerator.prepare(
            model, optimizer, scheduler)
        self.ref_model = None
        if cfg.algorithm.uses_reference:
            ref, _ = load_policy(model_path, dtype=cfg.model.dtype,
                                 trust_remote_code=cfg.model.trust_remote_code)
            # Not prepared: accelerate never shards a model prepared for evaluation, and would
            # put it in save_state, which under FSDP fails on an unwrapped module. Every process
            # holds the whole frozen reference on its device.
            self.ref_model = ref.eval().requires_grad_(False).to(self.accelerator.device)
        self.engine = engine or make_engine(cfg.rollout.engine, self._engine_model(),
                                            self.tokenizer, **self._engine_options())
        # Global: every process draws the same indices and rolls out its `shard` of them.
        self.sampler = PromptSampler(len(self.examples), cfg.seed, cfg.data.shuffle)
        self.settings = RolloutSettings.from_config(cfg.rollout, cfg.model, cfg.data)
        self.step = 0

    def _unwrapped(self) -> Any:
        return self.accelerator.unwrap_model(self.model)

    def _engine_model(self) -> Any:
        return self._unwrapped() if self.generation_model is None else self.generation_model

    def _update_engine(self) -> None:
        if self.generation_model is not None:
            refresh_copy(self.model, self.generation_model)
        self.engine.update_weights(self._engine_model())

    def _generating(self) -> contextlib.AbstractContextManager:
        """Whole weights for the engine while it generates (a collective under ZeRO-3)."""
        if self.generation_model is not None:
            return contextlib.nullcontext(self.generation_model)
        return full_weights(self.accelerator, self.model)

    def _engine_options(self) -> dict[str, Any]:
        if self.cfg.rollout.engine == "vllm":
            return {"gpu_memory_utilization": self.cfg.rollout.vllm_gpu_memory_utilization}
        return {"max_batch_size": self.cfg.rollout.max_batch_size}

    # ------------------------------------------------------------------ resume / checkpoint
    def maybe_resume(self) -> None:
        ckpt = self.resume_from
        if ckpt is None:
            return
        state = ckpt.load_state()
        if ckpt.accelerate_dir is not None:
            # What every process saved: weights (or shards), optimiser, scheduler, its RNGs.
            self.accelerator.load_state(str(ckpt.accelerate_dir))
        elif is_sharded(self.accelerator):
            raise UserError(f"{ckpt.path} was written by a single process; a sharded run "
                            "resumes only from its own checkpoints")
        else:
            load_trained_weights(self._unwrapped(), ckpt.model_dir)
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            set_rng_state(state["rng"])
        self.sampler.load_state_dict(state["data"])
        self.step = ckpt.step
        self._update_engine()
        if self.is_main:
            print(f"resumed from {ckpt.path} (step {ckpt.step})")

    def save(self) -> None:
        """One process: calibrl's checkpoint (model, optimiser, scheduler, data, RNG). Several,
        or sharded: the same folder with the optimiser, scheduler and RNGs of every process in
        `accelerate/` (accelerate's `save_state`, sharded under FSDP / DeepSpeed)."""
        self.accelerator.wait_for_everyone()
        self._stop_if_non_finite({"weight": self._max_abs_weight()})
        model_state = gathered_state_dict(self.accelerator, self.model)
        state_dir = (save_processes_state(self.accelerator, self.run_dir, self.step)
                     if saves_processes_state(self.accelerator) else None)
        if self.is_main:
            trainer_state = {"data": self.sampler.state_dict()}
            if state_dir is None:
                trainer_state = {"optimizer": self.optimizer.state_dict(),
                                 "scheduler": self.scheduler.state_dict(), **trainer_state}
            save_checkpoint(self.run_dir, self.step, model=self._unwrapped(),
                            tokenizer=self.tokenizer, keep_last=self.cfg.checkpoint.keep_last,
                            trainer_state=trainer_state, model_state=model_state,
                            state_dir=state_dir)
        self.accelerator.wait_for_everyone()

    # ------------------------------------------------------------------ non-finite values
    def _max_abs_weight(self) -> float:
        with torch.no_grad():
            return max(float(p.detach().abs().max()) for p in self.model.parameters())

    def _stop_if_non_finite(self, values: dict[str, float]) -> None:
        """Stop before a non-finite value reaches the weights or a checkpoint. Every process
        takes the same decision (one reduce), so none is left waiting in a collective."""
        bad = [f"{name} ({value})" for name, value in values.items() if not math.isfinite(value)]
        flag = torch.tensor(float(bool(bad)), device=self.accelerator.device)
        if self.accelerator.num_processes > 1:
            flag = self.accelerator.reduce(flag, reduction="sum")
        if float(flag) == 0:
            return
        last = list_checkpoints(self.run_dir)
        kept = f"the last good checkpoint is {last[-1].path}" if last else "no checkpoint yet"
        what = ", ".join(bad) or "value on another process"
        raise UserError(f"step {self.step}: non-finite {what}; training stopped before the "
                        f"update, {kept}")

    # ------------------------------------------------------------------ one step
    def _rollout(self):
        """The step's whole scored tree (every process's share) and its examples."""
        batch_examples = [self.examples[i] for i in self.sampler.next(
            self.cfg.rollout.prompts_per_step)]
        lo, hi = self.shard
        # One seed per step for all processes; the streams are numbered from the share's first
        # prompt, so a sample is the same whichever process draws it.
        seed = step_seed(self.cfg.seed, self.step)
        self.model.eval()
        with torch.no_grad(), self.accelerator.autocast(), self._generating():
            tree = run_rollout(self.engine, self.tokenizer, batch_examples[lo:hi], self.settings,
                               self.cfg.algorithm.mode, seed, first_prompt=lo)
        return gather_trees(self.accelerator, score_tree(tree)), batch_examples

    def _old_logprobs(self, model: Any, micro: list) -> list[torch.Tensor]:
        with torch.no_grad(), self.accelerator.autocast():
            return [token_logprobs(model, mb, self.cfg.rollout.temperature,
                                   shared_context=self.cfg.optim.shared_context)[0]
                    for mb in micro]

    def _optimise(self, batch) -> dict[str, float]:
        """`ppo_epochs` passes over this process's rows of the global `batch`. A micro-batch's
        loss weight is its share of the global batch and the processes' gradients are summed
        (DDP, FSDP and DeepSpeed average them, hence the factor `num_processes`), so the update
        is the one a single process would make from the whole batch."""
        algo, temperature = self.cfg.algorithm, self.cfg.rollout.temperature
        lo, hi = self.shard
        mine = (batch.prompt_group >= lo) & (batch.prompt_group < hi)
        full_mask = batch.loss_mask.to(self.accelerator.device)
        local = batch.select(mine).trim() if self.accelerator.num_processes > 1 else batch
        micro = local.to(self.accelerator.device).split(self.cfg.optim.micro_batch_size)
        scale = self.accelerator.num_processes
        self.model.train()
        # One pass: old = current policy (ratio 1, TRL's convention); more: freeze them first.
        old = self._old_logprobs(self.model, micro) if algo.ppo_epochs > 1 else None
        ref = self._old_logprobs(self.ref_model, micro) if self.ref_model is not None else None
        acc = _Accumulated()
        for _ in range(algo.ppo_epochs):
            worst_loss = 0.0  # the first non-finite micro-batch loss, if any
            for i, mb in enumerate(micro):
                weight = micro_batch_weight(algo.loss_agg, mb.loss_mask, full_mask)
                with self._sync_after(i == len(micro) - 1), self.accelerator.autocast():
                    logp, entropy = token_logprobs(self.model, mb, temperature, with_entropy=True,
                                                   shared_context=self.cfg.optim.shared_context)
                    loss, metrics = policy_loss(
                        logp, logp.detach() if old is None else old[i], mb.advantages,
                        mb.loss_mask, clip_low=algo.clip_low, clip_high=algo.clip_high,
                        dual_clip=algo.dual_clip, agg=algo.loss_agg,
                        max_len=self.settings.max_response_tokens(algo.mode),
                        kl_coef=row_kl_coef(mb.sample_type, algo.kl_coef,
                                            algo.kl_coef_confidence),
                        ref_logp=None if ref is None else ref[i], kl_estimator=algo.kl_estimator,
                        sample_type=mb.sample_type)
                    self.accelerator.backward(loss * (weight * scale))
                mask = mb.loss_mask > 0
                metrics["entropy"] = float(entropy[mask].mean()) if mask.any() else 0.0
                metrics["loss"] = float(loss.detach())
                if math.isfinite(worst_loss) and not math.isfinite(metrics["loss"]):
                    worst_loss = metrics["loss"]
                acc.add(metrics, weight)
            grad_norm = self.accelerator.clip_grad_norm_(self.model.parameters(),
                                                         self.cfg.optim.max_grad_norm)
            self._stop_if_non_finite({"loss": worst_loss, "gradient norm": float(grad_norm)})
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
        acc = _Accumulated.merged([_Accumulated(*part) for part in gather_each(
            self.accelerator, (acc.sums, acc.weights))])
        return {**{f"train/{k}": v for k, v in acc.means().items()},
                "train/grad_norm": float(grad_norm), "train/lr": self.scheduler.get_last_lr()[0]}

    def _sync_after(self, last: bool) -> contextlib.AbstractContextManager:
        """Gradients are reduced over processes once per pass, in its last backward: before it,
        `no_sync` (DDP, FSDP) and `sync_gradients = False` (DeepSpeed, whose engine steps in the
        backward that syncs)."""
        self.accelerator.sync_gradients = last
        return contextlib.nullcontext() if last else self.accelerator.no_sync(self.model)

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
        metrics = {**rollout_stats(tree), **self._optimise(batch)}
        self._update_engine()
        step_s = time.perf_counter() - start
        tokens = int(batch.response_mask.sum())
        metrics.update({"time/rollout_s": rollout_s, "time/train_s": step_s - rollout_s,
                        "time/step_s": step_s, "time/tokens_per_s": tokens / step_s})
        if self.held_out is not None and self.held_out.due(self.step):
            metrics.update(self._evaluate_held_out())
        self._log(metrics, tree, batch_examples)
        return metrics

    def _evaluate_held_out(self) -> dict[str, float]:
        """On the main process; the others only join the gathering of the weights."""
        self.model.eval()
        with torch.no_grad(), self.accelerator.autocast(), self._generating() as model:
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

    # ------------------------------------------------------------------ the run
    def train(self) -> Path:
        """Run to `optim.total_steps`; returns the directory of the final Hugging Face model."""
        try:
            self._train()
        except BaseException:
            self.run.close(failed=True)
            raise
        self.run.close()
        final = self.run.final / "final-model"
        if self.is_main and self.cfg.checkpoint.push_to_hub:
            self._push_to_hub(self.cfg.checkpoint.push_to_hub, final)
        return final

    def _push_to_hub(self, repo_id: str, saved: Path) -> None:
        """Push the final model and tokenizer; the run is complete on disk whatever happens."""
        try:
            self.final_model.push_to_hub(repo_id)
            self.tokenizer.push_to_hub(repo_id)
        except Exception as err:  # login, network or permission errors of huggingface_hub
            raise UserError(f"pushing the final model to the Hub repo {repo_id!r} failed "
                            f"({str(err).splitlines()[0] if str(err) else type(err).__name__}); "
                            f"it is saved in {saved}") from None
        print(f"pushed the final model to https://huggingface.co/{repo_id}")

    def _train(self) -> None:
        cfg = self.cfg
        if self.is_main:
            atomic_write_text(self.run_dir / "config.yaml", dump_settings(cfg))
            print(f"run directory: {self.run.final} (config.yaml, metrics.jsonl, "
                  "tensorboard/, checkpoint-*/, final-model/)")
        self.maybe_resume()
        self.logger = MetricsLogger(self.run_dir, tensorboard=cfg.logging.tensorboard and
                                    self.is_main, wandb=cfg.logging.wandb and self.is_main,
                                    wandb_project=cfg.logging.wandb_project,
                                    run_name=self.run.final.name, config=cfg.model_dump(),
                                    resume_step=self.resume_from.step if self.resume_from else None)
        bar = tqdm(total=cfg.optim.total_steps, initial=self.step, desc=cfg.algorithm.mode,
                   disable=not self.is_main, dynamic_ncols=True)
        try:
            while self.step < cfg.optim.total_steps:
                metrics = self.train_step()
                bar.update(1)
                bar.set_postfix(acc=f"{metrics.get('answer/accuracy', 0):.2f}",
                                conf=f"{metrics.get('calibration/confidence_mean', 0):.2f}")
                if self.step % cfg.checkpoint.every == 0 or self.step == cfg.optim.total_steps:
                    self.save()
        finally:
            bar.close()
            self.logger.close()
        model_state = gathered_state_dict(self.accelerator, self.model)
        if self.is_main:
            self.final_model = final_model(self._unwrapped())  # LoRA: merged into the base
            with atomic_dir(self.run_dir / "final-model") as tmp:
                self.final_model.save_pretrained(tmp, state_dict=model_state)
                self.tokenizer.save_pretrained(tmp)
            self.run.commit()
            print(f"final model: {self.run.final / 'final-model'}")
        self.accelerator.wait_for_everyone()
