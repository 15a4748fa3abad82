"""A training run under `accelerate launch` that records, per process, how it was sharded: the
number of processes, the distributed type, the device, and how many parameter elements the
process holds (under an FSDP full shard about 1/N of the model, under ZeRO-3 none outside a
gather). Arguments: `OUT key=value ...` settings overrides; writes
`OUT/rank{i}.json`. The whole weights are in the run's `final-model` (gathered by calibrl)."""

import json
import sys
from pathlib import Path

import training.coin_task  # noqa: F401  (registers the test_coin task)
from calibrl.settings import TrainSettings, load_settings
from calibrl.training.trainer import Trainer


def main() -> None:
    out = Path(sys.argv[1])
    trainer = Trainer(load_settings(TrainSettings, None, sys.argv[2:]))
    local = sum(p.numel() for p in trainer.model.parameters())
    trainer.train()
    acc = trainer.accelerator
    info = {"processes": acc.num_processes, "distributed_type": str(acc.distributed_type),
            "device": str(acc.device), "local_parameters": local}
    (out / f"rank{acc.process_index}.json").write_text(json.dumps(info))


if __name__ == "__main__":
    main()
