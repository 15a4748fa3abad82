"""What the trainer needs to run as several processes, kept out of its loop.

A step's `rollout.prompts_per_step` prompts are global: every process draws the same indices and
rolls out its contiguous share (`shard_bounds`), numbering the random streams from the share's
first prompt, so a sample does not depend on which process drew it. The scored shards are
gathered on every process (`gather_trees`), so advantages, loss weights and the logged rollout
statistics are those of the whole batch, exactly as one process would compute them.

Generation needs whole weights on each process, and no collective inside the engine (each
process's rollout stops after a different number of tokens). Under DeepSpeed ZeRO-3,
`full_weights` gathers the parameters for the rollout (`deepspeed.zero.GatheredParameters`, as
TRL's `unwrap_model_for_generation`). Under FSDP (version 1) the engine generates with a plain
copy of the model (`generation_copy`) refreshed after every optimiser step from
`FullyShardedDataParallel.summon_full_params` (`refresh_copy`), as TRL refreshes vLLM.
`refresh_copy` is tested on 2 CPU ranks of torch's FSDP; FSDP training and resume through
accelerate ran on one GPU (one process, so FSDP did not shard; benchmarks/gpu); DeepSpeed has
not run. Unlike TRL, the
ZeRO-3 path leaves DeepSpeed's module hooks in place while the parameters are gathered.

What a run was launched as (world size, distributed type, mixed precision) is easy to get wrong
silently: a launcher without `ACCELERATE_USE_CPU=1` or a forgotten `--mixed_precision` still
trains. `record_launch` prints it at start-up and keeps it in the run folder's `run_info.json`,
beside config.yaml, which stays the settings alone and loadable as a config.

Checkpoints of several or sharded processes: `save_processes_state` has every process write its part with
accelerate's `save_state` (sharded optimiser and model under FSDP / DeepSpeed, every process's
RNG states), and `gathered_state_dict` gives the whole weights for the Hugging Face `model/`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from accelerate import Accelerator
from accelerate.utils import DistributedType, gather_object

from calibrl.algo.rollout_tree import RolloutTree
from calibrl.errors import UserError
from calibrl.utils.atomic import atomic_write_text
from calibrl.utils.write_errors import naming_failed_writes

RUN_INFO_FILE = "run_info.json"


def check_launch(accelerator: Accelerator) -> None:
    """Refuse, at start-up, launches the trainer cannot run correctly."""
    launched = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if launched > 1 and accelerator.num_processes == 1:
        # e.g. `accelerate launch --multi_gpu` on a machine without GPUs and without
        # ACCELERATE_USE_CPU=1: every process would train the whole run alone.
        raise UserError(f"the launcher started {launched} processes (WORLD_SIZE) but accelerate "
                        "sees one; on CPU set ACCELERATE_USE_CPU=1 (see the README's "
                        "multi-process section)")
    if accelerator.distributed_type == DistributedType.FSDP and accelerator.is_fsdp2:
        raise UserError("FSDP2 is not supported (generation needs whole weights); use "
                        "fsdp_version 1, DeepSpeed or DDP")


def launch_info(accelerator: Accelerator) -> dict[str, Any]:
    """What this run was launched as, in accelerate's words: `world_size` (processes),
    `distributed_type` ("NO" for one plain process, "MULTI_CPU", "MULTI_GPU", "FSDP",
    "DEEPSPEED", ...), `mixed_precision` ("no", "bf16", "fp16", ...) and the main device."""
    kind = accelerator.distributed_type
    return {"world_size": accelerator.num_processes,
            "distributed_type": getattr(kind, "value", str(kind)),
            "mixed_precision": str(accelerator.mixed_precision),
            "device": str(accelerator.device)}


def describe_launch(info: dict[str, Any]) -> str:
    """One line of `launch_info` for the start of a run's output."""
    return (f"launch: world size {info['world_size']} ({info['distributed_type']}), "
            f"mixed precision {info['mixed_precision']}, device {info['device']}")


def record_launch(accelerator: Accelerator, run_dir: Path) -> dict[str, Any]:
    """Print `launch_info` and write it to `run_dir/run_info.json` (main process; the others
    only return it). A resumed run keeps the launches before it under `earlier_launches`, so a
    run continued with another world size or precision shows both."""
    info = {**launch_info(accelerator), "started": datetime.now(timezone.utc).isoformat(
        timespec="seconds")}
    if not accelerator.is_main_process:
        return info
    print(describe_launch(info), flush=True)
    path = Path(run_dir) / RUN_INFO_FILE
    try:
        before = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a fresh run (or an unreadable file: only history is lost)
        before = None
    if isinstance(before, dict):
        earlier = before.pop("earlier_launches", [])
        info["earlier_launches"] = [*(earlier if isinstance(earlier, list) else []), before]
    atomic_write_text(path, json.dumps(info, indent=2) + "\n")
    return info


def shard_bounds(count: int, rank: int, world_size: int) -> tuple[int, int]:
    """`[lo, hi)`: the contiguous share of `count` prompts that process `rank` rolls out."""
    if count % world_size:
        raise UserError(f"rollout.prompts_per_step={count} is global and must divide evenly "
                        f"over {world_size} processes; use a multiple of {world_size}")
    share = count // world_size
    return rank * share, (rank + 1) * share


def gather_trees(accelerator: Accelerator, tree: RolloutTree) -> RolloutTree:
    """Every process's scored shard, concatenated in rank order (= the global prompt order)."""
    if accelerator.num_processes == 1:
        return tree
    shards = gather_object([tree])
    return RolloutTree(mode=tree.mode, prompts=[p for shard in shards for p in shard.prompts])


def gather_each(accelerator: Accelerator, value: Any) -> list[Any]:
    """Every process's (picklable) `value`, in rank order."""
    return [value] if accelerator.num_processes == 1 else gather_object([value])


def is_sharded(accelerator: Accelerator) -> bool:
    """Whether a process holds only part of the weights or optimiser state."""
    return accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED)


@contextlib.contextmanager
def full_weights(accelerator: Accelerator, model: Any) -> Iterator[Any]:
    """The unwrapped model with whole parameters while the block runs. Every process must enter
    it (under ZeRO-3 the gathering is a collective)."""
    if (accelerator.distributed_type == DistributedType.DEEPSPEED
            and accelerator.state.deepspeed_plugin.zero_stage == 3):
        import deepspeed

        with deepspeed.zero.GatheredParameters(list(model.parameters())):
            yield accelerator.unwrap_model(model)
        return
    yield accelerator.unwrap_model(model)


def generation_copy(accelerator: Accelerator, model: Any) -> Any | None:
    """Under FSDP, a plain copy of the (not yet prepared) model for the engine to generate with:
    an FSDP module runs forward passes only in step with the other processes, and rollouts stop
    at different lengths on each. None otherwise (the engine shares the training model)."""
    if accelerator.distributed_type != DistributedType.FSDP:
        return None
    import copy

    return copy.deepcopy(model).to(accelerator.device).eval().requires_grad_(False)


def refresh_copy(model: Any, target: Any) -> None:
    """Copy the FSDP `model`'s whole parameters into `target` (`generation_copy`), on every
    process: `summon_full_params` gathers them (read-only), as TRL does to update vLLM."""
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel

    params = dict(target.named_parameters())
    with torch.no_grad(), FullyShardedDataParallel.summon_full_params(model, writeback=False):
        for name, value in model.named_parameters():
            # Inside summon_full_params FSDP's names are the original ones; strip what is left.
            for prefix in ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module."):
                name = name.replace(prefix, "")
            params[name].copy_(value)


def saves_processes_state(accelerator: Accelerator) -> bool:
    """Whether checkpoints hold accelerate's `save_state`: with several processes, or with
    sharded weights or optimiser state (FSDP / DeepSpeed, even on one process)."""
    return accelerator.num_processes > 1 or is_sharded(accelerator)


def gathered_state_dict(accelerator: Accelerator, model: Any) -> dict[str, Any] | None:
    """The whole weights of a sharded model (a collective; complete on the main process); None
    when the unwrapped model already holds them."""
    return accelerator.get_state_dict(model) if is_sharded(accelerator) else None


def save_processes_state(accelerator: Accelerator, run_dir: Path, step: int) -> Path:
    """Every process writes its part with `save_state` into one folder, which the main process
    names as a temporary of its own (`calibrl.utils.atomic.recover` removes it if that process
    dies) and then moves into checkpoint `step`."""
    name = f".tmp-accelerate-{step:06d}.{os.getpid()}" if accelerator.is_main_process else None
    path = run_dir / gather_each(accelerator, name)[0]
    if accelerator.is_main_process:
        shutil.rmtree(path, ignore_errors=True)
    accelerator.wait_for_everyone()
    try:
        with naming_failed_writes(run_dir / f"checkpoint-{step:06d}", path):  # e.g. a full disk
            accelerator.save_state(str(path))
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    accelerator.wait_for_everyone()
    return path
