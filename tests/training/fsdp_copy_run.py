"""Run under `torchrun --nproc_per_node 2` with gloo: FSDP (v1, full shard) on CPU; every
parameter is moved by 1, then `refresh_copy` must give the plain copy the whole moved weights.
Writes `ok` to the folder in argv[1] on rank 0 when it does."""

import copy
import functools
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

from calibrl.models import build_tiny_model, build_tokenizer
from calibrl.training.distributed import refresh_copy


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(0)  # the same initial weights on both ranks
    model = build_tiny_model(build_tokenizer(), hidden_size=32, num_layers=2, num_heads=2)
    expected = {n: p.detach() + 1 for n, p in model.named_parameters()}
    target = copy.deepcopy(model)
    policy = functools.partial(transformer_auto_wrap_policy,
                               transformer_layer_cls={type(model.model.layers[0])})
    sharded = FullyShardedDataParallel(model, device_id=torch.device("cpu"),
                                       auto_wrap_policy=policy, use_orig_params=True,
                                       sharding_strategy=ShardingStrategy.FULL_SHARD)
    local = sum(p.numel() for p in sharded.parameters())
    assert local < sum(p.numel() for p in target.parameters()), "not sharded"
    with torch.no_grad():
        for p in sharded.parameters():
            p.add_(1.0)
    refresh_copy(sharded, target)
    for name, value in target.named_parameters():
        assert torch.equal(value, expected[name]), name
    if dist.get_rank() == 0:
        (Path(sys.argv[1]) / "ok").write_text("ok")
    # Both ranks done before either tears gloo down: a rank that left first aborted the other
    # ("terminate called without an active exception") on a loaded machine.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
