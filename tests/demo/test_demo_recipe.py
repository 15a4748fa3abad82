"""The demo's recipe: it loads, it is complete, and configs/cpu_tiny.yaml trains as its RL stage."""

from pathlib import Path

import pytest

from calibrl.demo.pipeline import RECIPE, load_demo_settings
from calibrl.errors import UserError
from calibrl.settings import TrainSettings, load_settings
from calibrl.settings.base import leaf_fields
from calibrl.settings.demo import DemoSettings

CPU_TINY = Path(__file__).resolve().parents[2] / "configs/cpu_tiny.yaml"


def test_the_recipe_is_the_checkout_configs_demo_yaml():
    assert RECIPE == Path(__file__).resolve().parents[2] / "configs/demo.yaml"
    assert load_demo_settings() == load_demo_settings(RECIPE)


def test_cpu_tiny_yaml_holds_the_demos_rl_settings():
    from_yaml = load_settings(TrainSettings, CPU_TINY, [])
    from_demo = load_demo_settings().rl
    for section in ("rollout", "algorithm"):
        assert getattr(from_yaml, section) == getattr(from_demo, section), section
    for key in ("lr", "scheduler", "warmup_steps", "micro_batch_size", "mixed_precision",
                "total_steps"):
        assert getattr(from_yaml.optim, key) == getattr(from_demo.optim, key), key


def test_one_seed_and_one_question_for_every_stage():
    settings = load_demo_settings(overrides=["seed=5"])
    assert {settings.sft.seed, settings.eval.seed, settings.rl.seed, settings.probe.seed} == {5}
    with pytest.raises(UserError, match="sft.seed differs"):
        load_demo_settings(overrides=["sft.seed=3"])
    with pytest.raises(UserError, match="same confidence_question"):
        load_demo_settings(overrides=["eval.confidence_question=Sure?"])


def test_every_demo_setting_has_help_text():
    assert [key for key, field in leaf_fields(DemoSettings).items() if not field.description] == []


@pytest.mark.parametrize("overrides, message", [
    (["data.n_problemz=3"],
     "unknown config key 'data.n_problemz' (did you mean 'data.n_problems'?)"),
    (["rl.optim.lr=-1"], "config rl.optim.lr"),
    (["probe.samples=0"], "config probe.samples"),
])
def test_bad_recipe_values_are_one_line(overrides, message):
    with pytest.raises(UserError) as info:
        load_demo_settings(overrides=overrides)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_missing_recipe_says_what_to_do(monkeypatch, tmp_path):
    import calibrl.demo.pipeline as pipeline

    monkeypatch.setattr(pipeline, "RECIPE", tmp_path / "configs/demo.yaml")
    with pytest.raises(UserError, match="pass --config"):
        pipeline.load_demo_settings()
