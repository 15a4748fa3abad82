"""The real-model recipe (configs/demo_real.yaml): it loads, its data stage splits the training
questions in three, its tables name every stage, and its recalibration fits and applies a map.
The run itself is in tests/real_model."""

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from calibrl.demo.pipeline import load_demo_settings
from calibrl.demo.real import (
    HELD_OUT_EVAL,
    RECALIBRATED,
    RECALIBRATION,
    RealDemoSettings,
    format_counts_line,
    real_stage_rows,
    stage_recalibrate,
    stage_world_data,
)
from calibrl.errors import UserError
from calibrl.evaluation.run import read_predictions, write_run
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


def test_the_data_stage_splits_training_questions_into_format_rl_and_recalibration(tmp_path):
    settings = load_demo_settings(RECIPE, [f"out_dir={tmp_path}", "data.format_prompts=50",
                                           "data.rl_prompts=40",
                                           "data.recalibration_prompts=30"])
    counts = stage_world_data(settings, Console(quiet=True))
    assert counts["format"] == 50 and counts["rl"] == 40 and counts[RECALIBRATION] == 30
    rows = {name: pq.read_table(tmp_path / f"data/{name}.parquet").to_pylist()
            for name in ("train", "test", "held_out", "format", "rl", RECALIBRATION)}

    def questions(name):
        return {r["reward_model"]["ground_truth"]["question"] for r in rows[name]}

    assert questions("format") | questions("rl") | questions(RECALIBRATION) <= questions("train")
    assert not questions("format") & questions("rl")
    assert not (questions("format") | questions("rl")) & questions(RECALIBRATION)
    assert not questions("train") & (questions("test") | questions("held_out"))
    held_types = Counter(r["extra_info"]["fact_type"] for r in rows["held_out"])
    assert set(held_types) == set(settings.data.hold_out_type)
    assert not any(r["extra_info"]["fact_type"] in held_types
                   for name in ("train", "test") for r in rows[name])


def test_recalibration_by_entity_names_no_entity_a_stage_trains_on(tmp_path):
    def split(folder, *extra):
        settings = load_demo_settings(RECIPE, [f"out_dir={folder}", "data.format_prompts=50",
                                               "data.rl_prompts=40",
                                               "data.recalibration_prompts=30", *extra])
        counts = stage_world_data(settings, Console(quiet=True))
        return counts, {name: pq.read_table(folder / f"data/{name}.parquet").to_pylist()
                        for name in counts}

    counts, rows = split(tmp_path / "entities", "data.recalibration_split=entities")
    _, before = split(tmp_path / "training")
    assert counts[RECALIBRATION] == 30
    assert rows["test"] == before["test"] and rows["held_out"] == before["held_out"]

    def entities(name):
        return {e for r in rows[name] for e in r["extra_info"]["entities"]}

    assert not entities(RECALIBRATION) & (entities("train") | entities("test"))
    assert entities("format") | entities("rl") <= entities("train")


def test_no_recalibration_questions_write_no_split(tmp_path):
    settings = load_demo_settings(RECIPE, [f"out_dir={tmp_path}", "data.format_prompts=50",
                                           "data.rl_prompts=40",
                                           "data.recalibration_prompts=0"])
    assert RECALIBRATION not in stage_world_data(settings, Console(quiet=True))
    assert not (tmp_path / f"data/{RECALIBRATION}.parquet").exists()


def test_the_tables_name_every_stage_in_order():
    # in the order the stages report, whatever order they finished in
    results = {name: {"accuracy": 0.5, "count": 4} for name in
               ("eval-zero-shot", "eval-before", "eval-calibrated", "eval-after", HELD_OUT_EVAL,
                *RECALIBRATED.values())}
    names = [row["name"] for row in real_stage_rows(results)]
    assert names == ["the model as it comes", "format warm-up", "confidence warm-up",
                     "then two-turn RLCR", "RLCR, recalibrated (Platt)",
                     "after RL, held-out fact type", "held-out fact type, recalibrated (Platt)"]


def overconfident_rows(n, seed):
    """Answers stating 0.2-0.9, right at half that rate, in groups of two."""
    rng = np.random.default_rng(seed)
    stated = rng.uniform(0.2, 0.9, n)
    return [{"index": i, "correct": bool(rng.random() < c / 2), "confidence": 0.0,
             "stated_expected": float(c), "format_ok": True, "answer_len": 4, "conf_len": 9,
             "group": f"g{i % 2}", "cluster": str(i)} for i, c in enumerate(stated)]


def test_recalibration_fits_on_its_questions_and_rewrites_the_final_evaluations(tmp_path):
    settings = load_demo_settings(RECIPE, [f"out_dir={tmp_path}", "eval.bootstrap=0"])
    write_run(tmp_path / f"eval-{RECALIBRATION}", overconfident_rows(400, 0), settings.eval,
              "fit")
    raw = write_run(tmp_path / "eval-after", overconfident_rows(400, 1), settings.eval, "after")
    (tmp_path / HELD_OUT_EVAL).mkdir()  # a folder this run did not evaluate is left alone
    results = stage_recalibrate(settings, Console(quiet=True), ["eval-after"])
    assert list(results) == ["eval-after-recalibrated"]
    assert not (tmp_path / RECALIBRATED[HELD_OUT_EVAL]).exists()
    fixed = results["eval-after-recalibrated"]
    assert raw["ece"] > 0.15 and fixed["ece"] < raw["ece"] / 2
    assert fixed["auroc"] == pytest.approx(raw["auroc"])
    assert fixed["within_group_auroc"] == pytest.approx(raw["within_group_auroc"])
    rows = read_predictions(tmp_path / "eval-after-recalibrated")
    assert [r["stated_before_recalibration"] for r in rows] == [
        r["stated_expected"] for r in read_predictions(tmp_path / "eval-after")]
    described = json.loads((tmp_path / "eval-after-recalibrated/recalibration.json").read_text())
    assert described["method"] == "platt" and described["answers"] == 400
    assert described["reading"] == "expected" and 0 < described["slope"]


def test_the_format_line_counts_each_reading():
    line = format_counts_line(Counter({"named right": 3, "named wrong": 1}))
    assert line.endswith("named right 3 (75%), named wrong 1 (25%), named none 0 (0%)")
