"""The demo's stages at toy size: artefacts exist and parse."""

from pathlib import Path

from rich.console import Console

from calibrl.data import load_examples
from calibrl.demo.pipeline import DemoSettings, stage_data_and_rewards


def test_data_and_reward_stage(tmp_path: Path):
    settings = DemoSettings(out_dir=tmp_path, n_problems=40, test_size=10, max_number=12)
    kinds = stage_data_and_rewards(settings, Console(file=open("/dev/null", "w")))
    assert len(load_examples(tmp_path / "data/train.parquet")) == 30
    assert len(load_examples(tmp_path / "data/test.parquet")) == 10
    assert kinds["reference"][1.0] == 10  # every reference solution verifies
    assert kinds["no answer tag"][0] == 10
    assert kinds["corrupted"][0.1] >= 8  # an operator swap rarely keeps the value
