"""One policy update from a step's batch: `ppo_epochs` passes in micro-batches, each pass one
optimiser and one scheduler step, stopped before a non-finite value reaches the weights.

Every process holds the whole batch (`TrainBatch`, rows `[N, ...]`) and trains on its own
prompts' rows. A micro-batch's loss is weighted by its share of the whole batch (the
aggregation's `micro_batch_weight`) and the processes' gradients are summed, so the update is
the one a single process would make from the whole batch.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator

from calibrl.algo.aggregation import micro_batch_weight
from calibrl.algo.batch import TrainBatch
from calibrl.algo.policy_loss import policy_loss, row_kl_coef, rows_with_gradient
from calibrl.errors import UserError
from calibrl.settings import TrainSettings
from calibrl.training.build import Policy
from calibrl.training.checkpoint import list_checkpoints
from calibrl.training.distributed import gather_each
from calibrl.training.policy import token_logprobs


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


def update_policy(policy: Policy, batch: TrainBatch, cfg: TrainSettings, *,
                  shard: tuple[int, int], max_len: int, step: int, run_dir: Path
                  ) -> dict[str, float]:
    """`ppo_epochs` passes over this process's rows (prompts `shard = [lo, hi)`) of the global
    `batch`; returns the step's `train/*` metrics. `max_len` is Dr. GRPO's constant normaliser.

    DDP, FSDP and DeepSpeed average the processes' gradients, hence the factor
    `num_processes` on each loss to make them a sum."""
    algo, accelerator, model = cfg.algorithm, policy.accelerator, policy.model
    lo, hi = shard
    mine = (batch.prompt_group >= lo) & (batch.prompt_group < hi)
    full_mask = batch.loss_mask.to(accelerator.device)
    local = batch.select(mine).trim() if accelerator.num_processes > 1 else batch
    trained = len(batch)
    if cfg.optim.skip_rows_without_gradient and accelerator.num_processes == 1:
        local, trained = _rows_that_train(local, policy, cfg)
    micro = local.to(accelerator.device).split(cfg.optim.micro_batch_size)
    scale = accelerator.num_processes
    model.train()
    # One pass: old = current policy (ratio 1, TRL's convention); more: freeze them first.
    old = _frozen_logprobs(policy, model, micro, cfg) if algo.ppo_epochs > 1 else None
    ref = (_frozen_logprobs(policy, policy.ref_model, micro, cfg)
           if policy.ref_model is not None else None)
    acc = _Accumulated()
    for _ in range(algo.ppo_epochs):
        worst_loss = 0.0  # the first non-finite micro-batch loss, if any
        for i, mb in enumerate(micro):
            weight = micro_batch_weight(algo.loss_agg, mb.loss_mask, full_mask)
            with _sync_after(accelerator, model, i == len(micro) - 1), accelerator.autocast():
                logp, entropy = token_logprobs(model, mb, cfg.rollout.temperature,
                                               with_entropy=True,
                                               shared_context=cfg.optim.shared_context)
                loss, metrics = policy_loss(
                    logp, logp.detach() if old is None else old[i], mb.advantages,
                    mb.loss_mask, clip_low=algo.clip_low, clip_high=algo.clip_high,
                    dual_clip=algo.dual_clip, agg=algo.loss_agg, max_len=max_len,
                    kl_coef=row_kl_coef(mb.sample_type, algo.kl_coef, algo.kl_coef_confidence),
                    ref_logp=None if ref is None else ref[i], kl_estimator=algo.kl_estimator,
                    sample_type=mb.sample_type)
                accelerator.backward(loss * (weight * scale))
            mask = mb.loss_mask > 0
            metrics["entropy"] = float(entropy[mask].mean()) if mask.any() else 0.0
            metrics["loss"] = float(loss.detach())
            if math.isfinite(worst_loss) and not math.isfinite(metrics["loss"]):
                worst_loss = metrics["loss"]
            acc.add(metrics, weight)
        grad_norm = accelerator.clip_grad_norm_(model.parameters(), cfg.optim.max_grad_norm)
        stop_if_non_finite(accelerator, {"loss": worst_loss, "gradient norm": float(grad_norm)},
                           step=step, run_dir=run_dir)
        policy.optimizer.step()
        policy.scheduler.step()
        policy.optimizer.zero_grad(set_to_none=True)
    acc = _Accumulated.merged([_Accumulated(*part) for part in gather_each(
        accelerator, (acc.sums, acc.weights))])
    return {**{f"train/{k}": v for k, v in acc.means().items()},
            "train/grad_norm": float(grad_norm), "train/lr": policy.scheduler.get_last_lr()[0],
            "train/rows_trained": trained / max(len(batch), 1)}


def _rows_that_train(batch: TrainBatch, policy: Policy, cfg: TrainSettings
                     ) -> tuple[TrainBatch, int]:
    """`batch` without the rows that add nothing to the gradient (`rows_with_gradient`), and
    how many rows have one. One row stays when none has, so every parameter still gets a
    (zero) gradient and AdamW steps as it would on the whole batch."""
    algo = cfg.algorithm
    kl = (row_kl_coef(batch.sample_type, algo.kl_coef, algo.kl_coef_confidence)
          if policy.ref_model is not None else 0.0)
    keep = rows_with_gradient(batch.advantages, batch.loss_mask, kl)
    trained = int(keep.sum())
    if trained == len(batch):
        return batch, trained
    keep[0] |= trained == 0
    return batch.select(keep).trim(), trained


def _frozen_logprobs(policy: Policy, model: Any, micro: list[TrainBatch], cfg: TrainSettings
                     ) -> list[torch.Tensor]:
    """`model`'s log-probs of each micro-batch's response tokens (`[B, R]` each), no grad."""
    with torch.no_grad(), policy.accelerator.autocast():
        return [token_logprobs(model, mb, cfg.rollout.temperature,
                               shared_context=cfg.optim.shared_context)[0] for mb in micro]


def _sync_after(accelerator: Accelerator, model: Any, last: bool
                ) -> contextlib.AbstractContextManager:
    """Gradients are reduced over processes once per pass, in its last backward: before it,
    `no_sync` (DDP, FSDP) and `sync_gradients = False` (DeepSpeed, whose engine steps in the
    backward that syncs)."""
    accelerator.sync_gradients = last
    return contextlib.nullcontext() if last else accelerator.no_sync(model)


def max_abs_weight(model: Any) -> float:
    with torch.no_grad():
        return max(float(p.detach().abs().max()) for p in model.parameters())


def stop_if_non_finite(accelerator: Accelerator, values: dict[str, float], *, step: int,
                       run_dir: Path) -> None:
    """Stop with a `UserError` before a non-finite value (`name -> value`) reaches the weights
    or a checkpoint, so the last checkpoint in `run_dir` is the last good state. Every process
    takes the same decision (one reduce), so none is left waiting in a collective."""
    bad = [f"{name} ({value})" for name, value in values.items() if not math.isfinite(value)]
    flag = torch.tensor(float(bool(bad)), device=accelerator.device)
    if accelerator.num_processes > 1:
        flag = accelerator.reduce(flag, reduction="sum")
    if float(flag) == 0:
        return
    last = list_checkpoints(run_dir)
    kept = f"the last good checkpoint is {last[-1].path}" if last else "no checkpoint yet"
    what = ", ".join(bad) or "value on another process"
    raise UserError(f"step {step}: non-finite {what}; training stopped before the update, {kept}")
