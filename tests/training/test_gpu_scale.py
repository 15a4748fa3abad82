"""GPU-only training checks, run by `scripts/gpu_tests.sh` (marked `gpu`, deselected by default):
`calibrl train` with the vLLM engine, whose copy must follow the trained weights after every
step, and 2-GPU runs sharded by FSDP (v1, full shard) and by DeepSpeed ZeRO-3 (when deepspeed
is installed), which must make the update of one GPU on the same global batch and resume from
their sharded checkpoints. Each skips cleanly without what it needs."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from calibrl.rollout.engine import SamplingParams
from calibrl.settings import TrainSettings, load_settings
from rollout.test_gpu import teacher_forced  # the CUDA engine tests' reference log-probs
from training.coin_runs import checkout_env, coin_run, free_port, run_settings

SCRIPT = Path(__file__).with_name("sharded_gpu_run.py")

pytestmark = pytest.mark.gpu


def _gpus(n: int) -> None:
    if not torch.cuda.is_available() or torch.cuda.device_count() < n:
        pytest.skip(f"needs {n} CUDA device(s)")


def gpu_settings(model: Path, train: Path, out: Path, *extra: str) -> list[str]:
    return run_settings(model, train, out, "optim.lr=1e-3", "optim.mixed_precision=no", *extra)


def test_vllm_engine_follows_the_trained_weights(tmp_path):
    _gpus(1)
    pytest.importorskip("vllm")
    import training.coin_task  # noqa: F401  (registers the test_coin task)
    from calibrl.models.loading import load_policy
    from calibrl.training.trainer import Trainer

    # head_dim 64: a size every vLLM attention backend supports.
    model_dir, train = coin_run(tmp_path, hidden=128, layers=2)
    cfg = load_settings(TrainSettings, None, gpu_settings(
        model_dir, train, tmp_path / "runs", "rollout.engine=vllm", "model.dtype=bfloat16",
        "rollout.vllm_gpu_memory_utilization=0.2", "optim.total_steps=2", "optim.lr=1e-2"))
    trainer = Trainer(cfg)
    trainer.train()
    trained = trainer._unwrapped()
    initial, _ = load_policy(str(model_dir), dtype="bfloat16")
    initial = initial.to(trained.device)

    prompt = trainer.tokenizer.encode("Using the numbers [3, 5, 7], create")
    gens = trainer.engine.generate([prompt], SamplingParams(n=4, max_new_tokens=12, seed=0))[0]
    to_trained = torch.cat([torch.tensor(g.logprobs) - teacher_forced(trained, prompt, g.token_ids)
                            for g in gens]).abs().mean()
    to_initial = torch.cat([torch.tensor(g.logprobs) - teacher_forced(initial, prompt, g.token_ids)
                            for g in gens]).abs().mean()
    # bf16 on both sides: vLLM's kernels differ from transformers' by a few hundredths.
    assert to_trained < 0.1, f"vLLM's log-probs are {to_trained:.3f} from the trained model's"
    assert to_initial > 3 * to_trained, "the weights did not move, or vLLM kept the initial ones"


FSDP = ["--use_fsdp", "--fsdp_version", "1", "--fsdp_sharding_strategy", "FULL_SHARD",
        "--fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP",
        "--fsdp_transformer_layer_cls_to_wrap", "LlamaDecoderLayer",
        "--fsdp_state_dict_type", "SHARDED_STATE_DICT", "--fsdp_use_orig_params", "true"]
ZERO3 = ["--use_deepspeed", "--zero_stage", "3"]
SHARDINGS = {"fsdp": (FSDP, "FSDP", None), "zero3": (ZERO3, "DEEPSPEED", "deepspeed")}


def _launch(out: Path, settings: list[str], processes: int, *launcher: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    subprocess.run([accelerate, "launch", "--num_processes", str(processes), "--num_machines",
                    "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                    "--main_process_port", str(free_port()), *launcher, str(SCRIPT), str(out),
                    *settings], check=True, env=checkout_env())


def _final(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / "run/final-model/model.safetensors"))


def _relative_gap(a: dict, b: dict, start: dict) -> float:
    """|update_a - update_b| / |update_b| over all weights: Adam turns float noise in near-zero
    gradients into whole steps of a few elements, so elementwise tolerances say little."""
    da = torch.cat([(a[k].float() - start[k].float()).flatten() for k in start])
    db = torch.cat([(b[k].float() - start[k].float()).flatten() for k in start])
    return float((da - db).norm() / db.norm())


@pytest.mark.parametrize("sharding", SHARDINGS)
def test_two_gpus_sharded_match_one_gpu_and_resume_from_their_shards(tmp_path, sharding):
    _gpus(2)
    launcher, kind, package = SHARDINGS[sharding]
    if package:
        pytest.importorskip(package)
    model, train = coin_run(tmp_path, layers=2)
    start = load_file(str(model / "model.safetensors"))
    one, two = tmp_path / "one", tmp_path / "two"
    longer = ["optim.total_steps=4", "checkpoint.every=2"]
    _launch(one, gpu_settings(model, train, one, *longer), 1)
    _launch(two, gpu_settings(model, train, two, *longer), 2, *launcher)

    infos = [json.loads((two / f"rank{r}.json").read_text()) for r in (0, 1)]
    total = sum(t.numel() for t in start.values())
    for info in infos:
        assert info["processes"] == 2 and kind in info["distributed_type"]
        assert info["device"].startswith("cuda")
        assert info["local_parameters"] < 0.75 * total, "the weights were not sharded"
    single, sharded = _final(one), _final(two)
    assert set(sharded) == set(single)
    assert _relative_gap(sharded, single, start) < 0.05
    lines = [(two / "run/metrics.jsonl").read_text().splitlines(),
             (one / "run/metrics.jsonl").read_text().splitlines()]
    for a, b in zip(*map(lambda ls: [json.loads(x) for x in ls], lines), strict=True):
        assert a["answer/accuracy"] == b["answer/accuracy"]  # the same samples were drawn

    # Killed after step 2 (its checkpoint kept, everything later removed), resumed from the
    # shards every process saved with save_state: it must reach the same final weights.
    assert (two / "run/checkpoint-000002/accelerate").is_dir()
    shutil.rmtree(two / "run/checkpoint-000004")
    shutil.rmtree(two / "run/final-model")
    _launch(two, gpu_settings(model, train, two, *longer, "checkpoint.resume=auto"), 2, *launcher)
    assert _relative_gap(_final(two), sharded, start) < 1e-3
