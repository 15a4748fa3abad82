"""The real-model recipe (configs/demo_real.yaml): it loads, its data stage splits the training
questions in two, and its tables name every stage. The run itself is in tests/real_model."""

from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from calibrl.demo.pipeline import load_demo_settings
from calibrl.demo.real import (
    HELD_OUT_EVAL,
    RealDemoSettings,
    format_counts_line,
    real_stage_rows,
    stage_world_data,
)
from calibrl.errors import UserError
from calibrl.settings.base import leaf_fields

RECIPE = Path(__file__).resolve().parents[2] / "configs/demo_real.yaml"


def test_the_recipe_loads_as_the_real_demo_with_one_seed():
    settings = load_demo_settings(RECIPE, ["seed=4"])
    assert isinstance(settings, RealDemoSettings)
    assert {settings.sft.seed, settings.calibrate.seed, settings.eval.seed, settings.rl.seed} == {4}
    # every training stage tunes the same top blocks of the pretrained model
    assert settings.sft.train_layers == settings.calibrate.train_layers == \
        settings.rl.model.train_layers
    with pytest.raises(UserError, match="same confidence_question"):
        load_demo_settings(RECIPE, ["eval.confidence_question=Sure?"])


def test_every_setting_has_help_text():
    assert [k for k, f in leaf_fields(RealDemoSettings).items() if not f.description] == []


def test_the_data_stage_splits_training_questions_into_format_and_rl(tmp_path):
    settings = load_demo_settings(RECIPE, [f"out_dir={tmp_path}", "data.format_prompts=50",
                                           "data.rl_prompts=40"])
    counts = stage_world_data(settings, Console(quiet=True))
    assert counts["format"] == 50 and counts["rl"] == 40
    rows = {name: pq.read_table(tmp_path / f"data/{name}.parquet").to_pylist()
            for name in ("train", "test", "held_out", "format", "rl")}

    def questions(name):
        return {r["reward_model"]["ground_truth"]["question"] for r in rows[name]}

    assert questions("format") | questions("rl") <= questions("train")
    assert not questions("format") & questions("rl")
    assert not questions("train") & (questions("test") | questions("held_out"))
    held_types = Counter(r["extra_info"]["fact_type"] for r in rows["held_out"])
    assert set(held_types) == set(settings.data.hold_out_type)
    assert not any(r["extra_info"]["fact_type"] in held_types
                   for name in ("train", "test") for r in rows[name])


def test_the_tables_name_every_stage_in_order():
    results = {name: {"accuracy": 0.5, "count": 4} for name in
               ("eval-zero-shot", "eval-before", "eval-calibrated", "eval-after", HELD_OUT_EVAL)}
    names = [row["name"] for row in real_stage_rows(results)]
    assert names == ["the model as it comes", "format warm-up", "confidence warm-up",
                     "then two-turn RLCR", "after RL, held-out fact type"]


def test_the_format_line_counts_each_reading():
    line = format_counts_line(Counter({"named right": 3, "named wrong": 1}))
    assert line.endswith("named right 3 (75%), named wrong 1 (25%), named none 0 (0%)")
