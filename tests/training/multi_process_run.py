"""A training run that also writes what each process ended with: `rank{i}.pt` (its weights) and
`rank{i}.json` (process count, mixed precision, and under DDP how many times the gradients
were reduced over processes). Run as a plain script (one process) or under
`accelerate launch` / `torchrun`; arguments are `OUT key=value ...` settings overrides. With
`DIE_AT_STEP=k` in the environment every process dies as step k begins (a killed run)."""

import json
import os
import sys
from pathlib import Path

import torch

import training.coin_task  # noqa: F401  (registers the test_coin task)
from calibrl.settings import TrainSettings, load_settings
from calibrl.training.trainer import Trainer


def main() -> None:
    out = Path(sys.argv[1])
    trainer = Trainer(load_settings(TrainSettings, None, sys.argv[2:]))
    die_at = int(os.environ.get("DIE_AT_STEP", "0"))
    real_step = trainer.train_step

    def step():
        if trainer.step + 1 == die_at:
            raise SystemExit(f"killed at step {die_at}")
        return real_step()

    trainer.train_step = step
    rounds = _count_gradient_reductions(trainer.model)
    trainer.train()
    rank, acc = trainer.accelerator.process_index, trainer.accelerator
    weights = {k: v.detach().cpu() for k, v in trainer._unwrapped().state_dict().items()}
    torch.save(weights, out / f"rank{rank}.pt")
    info = {"processes": acc.num_processes, "mixed_precision": acc.mixed_precision,
            "gradient_reductions": rounds[0]}
    (out / f"rank{rank}.json").write_text(json.dumps(info))


def _count_gradient_reductions(model) -> list[int]:
    """Under DDP, count the rounds of gradient all-reduce (bucket 0 starts each round)."""
    rounds = [0]
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

        def hook(state, bucket):
            rounds[0] += bucket.index() == 0
            return allreduce_hook(state, bucket)

        model.register_comm_hook(None, hook)
    return rounds


if __name__ == "__main__":
    main()
