"""Several processes train as one: 2 CPU ranks (DDP over gloo, launched the way the README says)
end with identical weights, equal (within float tolerance) to one process trained on the same
global batch, with the same logged rollout statistics; killed after a checkpoint, they resume to
the uninterrupted run's weights; the launcher's mixed precision is used unless the config names
one; under FSDP (2 CPU ranks, full shard) the generation copy receives the whole weights."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from calibrl.models import create_tiny_model
from training.coin_runs import checkout_env, coin_run, free_port, run_settings

SCRIPT = Path(__file__).with_name("multi_process_run.py")

pytestmark = pytest.mark.slow


def _env(**extra: str) -> dict[str, str]:
    # CPU ranks and a CPU single process, also on a machine with a GPU.
    return checkout_env(OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="", **extra)


def _run_one(out: Path, settings: list[str], **env: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(SCRIPT), str(out), *settings], check=True,
                   env=_env(**env))


def _run_two(out: Path, settings: list[str], check: bool = True, **env: str) -> None:
    # The README's command: on CPU, accelerate starts N ranks only through its multi-GPU
    # launcher (torchrun) with ACCELERATE_USE_CPU=1; `--cpu --num_processes 2` starts one.
    out.mkdir(parents=True, exist_ok=True)
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
    subprocess.run([accelerate, "launch", "--multi_gpu", "--num_processes", "2",
                    "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                    "--main_process_port", str(free_port()), str(SCRIPT), str(out), *settings],
                   check=check, env=_env(ACCELERATE_USE_CPU="1", **env))


def _metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "run/metrics.jsonl").read_text().splitlines()]


# The default loss, and one whose weights count rows, with a batch-wide confidence std and two
# passes over each batch (old log-probs frozen before the first).
VARIANTS = {"token_mean": [], "seq_mean_batch_std_2_passes": [
    "algorithm.loss_agg=seq_mean_token_mean", "algorithm.confidence_std_scope=batch",
    "algorithm.ppo_epochs=2"]}


@pytest.mark.parametrize("variant", VARIANTS)
def test_two_ranks_train_as_one_process_on_the_same_global_batch(tmp_path, variant):
    model, train = coin_run(tmp_path)
    one, two = tmp_path / "one", tmp_path / "two"
    # Several processes run every row; the one-process reference does too (by default it would
    # leave the rows without a gradient out: the same update up to rounding, which Adam's first
    # steps amplify, and metrics over the rows trained).
    _run_one(one, run_settings(model, train, one, *VARIANTS[variant],
                               "optim.skip_rows_without_gradient=false"))
    _run_two(two, run_settings(model, train, two, *VARIANTS[variant]))
    passes = 2 if VARIANTS[variant] else 1

    infos = [json.loads((two / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [info["processes"] for info in infos] == [2, 2]
    assert json.loads((two / "run/run_info.json").read_text())["world_size"] == 2
    # Each rank has 12 rows a step, 3 micro-batches of 5; with no_sync the gradients are reduced
    # once per pass (without it, 3 times): 3 steps of `passes` passes.
    assert [info["gradient_reductions"] for info in infos] == [3 * passes] * 2
    rank0, rank1 = (torch.load(two / f"rank{r}.pt") for r in (0, 1))
    single = torch.load(one / "rank0.pt")
    initial = create_tiny_model(tmp_path / "again", hidden_size=32, num_layers=1, num_heads=2)
    from safetensors.torch import load_file

    start = load_file(str(initial / "model.safetensors"))
    assert any(not torch.equal(start[k], single[k]) for k in start)  # the weights moved
    for key in single:
        assert torch.equal(rank0[key], rank1[key]), f"ranks differ: {key}"
        torch.testing.assert_close(rank0[key], single[key], rtol=1e-4, atol=1e-5, msg=key)

    # The same samples were drawn and logged: rollout statistics, the loss, entropy and
    # gradient norm agree to float noise. (The per-sample-type train/*/ metrics are averages
    # over micro-batches, which depend on how rows fall into micro-batches, even on 1 process.)
    whole_batch = ("train/loss", "train/entropy", "train/grad_norm", "train/lr")
    for a, b in zip(_metrics(one), _metrics(two), strict=True):
        for key in a:
            if key.startswith(("answer/", "confidence/", "calibration/")) or key in whole_batch:
                assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-6), key


def test_two_ranks_resume_from_their_checkpoint_to_the_same_weights(tmp_path):
    model, train = coin_run(tmp_path)
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    longer = ["optim.total_steps=4", "checkpoint.every=2"]
    _run_two(straight, run_settings(model, train, straight, *longer))
    _run_two(killed, run_settings(model, train, killed, *longer), check=False, DIE_AT_STEP="4")
    assert not (killed / "run/final-model").exists()
    assert (killed / "run/checkpoint-000002/accelerate").is_dir()  # every process's state
    _run_two(killed, run_settings(model, train, killed, *longer, "checkpoint.resume=auto"))
    for rank in (0, 1):
        expected, got = (torch.load(d / f"rank{rank}.pt") for d in (straight, killed))
        for key in expected:
            assert torch.equal(expected[key], got[key]), f"rank {rank}: {key}"


def test_the_launchers_mixed_precision_is_used_unless_the_config_names_one(tmp_path):
    model, train = coin_run(tmp_path)
    short = ["optim.total_steps=1", "rollout.prompts_per_step=2"]
    launcher, config = tmp_path / "launcher", tmp_path / "config"
    _run_one(launcher, run_settings(model, train, launcher, *short),
             ACCELERATE_MIXED_PRECISION="bf16")
    _run_one(config, run_settings(model, train, config, *short, "optim.mixed_precision=no"),
             ACCELERATE_MIXED_PRECISION="bf16")
    assert json.loads((launcher / "rank0.json").read_text())["mixed_precision"] == "bf16"
    assert json.loads((config / "rank0.json").read_text())["mixed_precision"] == "no"


def test_fsdp_shards_refresh_the_whole_generation_copy(tmp_path):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    subprocess.run([torchrun, "--nproc_per_node", "2", "--master_port", str(free_port()),
                    str(Path(__file__).with_name("fsdp_copy_run.py")), str(tmp_path)],
                   check=True, env=_env())
    assert (tmp_path / "ok").is_file()
