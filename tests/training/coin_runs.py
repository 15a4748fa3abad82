"""What the launched-training tests share: a tiny model and coin-task data, the settings of a
short run, a free port, and the environment that makes launched ranks import this checkout."""

import os
import socket
from pathlib import Path

from calibrl.data import TaskExample
from calibrl.models import create_tiny_model
from calibrl.tasks.files import write_examples

TESTS = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def coin_run(tmp_path: Path, hidden: int = 32, layers: int = 1) -> tuple[Path, Path]:
    """A tiny model in `tmp_path/model` and 8 coin-task training rows; returns both paths."""
    from training.coin_task import COIN

    model = create_tiny_model(tmp_path / "model", hidden_size=hidden, num_layers=layers,
                              num_heads=2)
    gts = [{"target": t, "numbers": [1, 2, t]} for t in range(3, 11)]
    train = write_examples(tmp_path / "train.parquet", [
        TaskExample(COIN.name, COIN.make_prompt(gt), gt, i, "train") for i, gt in enumerate(gts)])
    return model, train


def run_settings(model: Path, train: Path, out: Path, *extra: str) -> list[str]:
    """Three steps of 4 prompts; later `extra` overrides win."""
    # micro_batch_size 5 < rows per process: several backward passes accumulate (no_sync).
    return [f"model.path={model}", f"data.train_path={train}", f"logging.output_dir={out}",
            "logging.run_name=run", "logging.tensorboard=false", "optim.total_steps=3",
            "optim.lr=1e-2", "optim.scheduler=constant", "optim.micro_batch_size=5",
            "rollout.prompts_per_step=4", "rollout.num_generations_answer=2",
            "rollout.num_generations_confidence=2", "rollout.max_answer_tokens=12",
            "rollout.max_confidence_tokens=6", "checkpoint.every=100", *extra]


def checkout_env(**extra: str) -> dict[str, str]:
    """This environment without accelerate's variables, with src/ and tests/ importable: the
    launched ranks must import this checkout's calibrl, installed or not."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")}
    path = os.pathsep.join([str(TESTS.parent / "src"), str(TESTS),
                            *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**env, "PYTHONPATH": path, **extra}
