"""The demo's RL settings and configs/cpu_tiny.yaml (documented as the same) must not drift."""

from pathlib import Path

from calibrl.demo.pipeline import RL_OVERRIDES
from calibrl.training.config import load_config

YAML = Path(__file__).resolve().parents[2] / "configs/cpu_tiny.yaml"


def test_cpu_tiny_yaml_holds_the_demos_rl_settings():
    from_yaml = load_config(str(YAML), [])
    from_demo = load_config(None, list(RL_OVERRIDES))
    for section in ("rollout", "algorithm"):
        assert getattr(from_yaml, section) == getattr(from_demo, section), section
    for key in ("lr", "scheduler", "warmup_steps", "micro_batch_size", "mixed_precision"):
        assert getattr(from_yaml.optim, key) == getattr(from_demo.optim, key), key
