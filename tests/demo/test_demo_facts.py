"""The facts demo: its recipe loads as its own settings, its data stage shows the warm-up exactly
the facts of the groups it should, the RL prompts are other countries, and (slow) every stage
runs and writes the report."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from calibrl.demo.facts import FactsDemoSettings, exposure_rows, stage_facts_data
from calibrl.demo.pipeline import load_demo_settings, run_demo
from calibrl.errors import UserError
from calibrl.settings.base import leaf_fields
from calibrl.settings.demo import DemoSettings
from calibrl.tasks import get_task
from calibrl.tasks.files import load_examples
from calibrl.tasks.mix import difficulty_of

RECIPE = Path(__file__).resolve().parents[2] / "configs/demo_facts.yaml"
SMALL_WORLD = ["data.n_facts=128", "data.test_size=32"]
QUIET = Console(file=open("/dev/null", "w"))  # noqa: SIM115


def _country(question: str) -> str:
    return question.rstrip("?").split()[-1]


def test_the_facts_recipe_loads_as_its_own_settings():
    settings = load_demo_settings(RECIPE, ["seed=4"])
    assert isinstance(settings, FactsDemoSettings)
    assert {settings.sft.seed, settings.eval.seed, settings.rl.seed} == {4}
    assert isinstance(load_demo_settings(), DemoSettings)  # the Countdown recipe is unchanged


def test_every_facts_demo_setting_has_help_text():
    assert [key for key, field in leaf_fields(FactsDemoSettings).items()
            if not field.description] == []


@pytest.mark.parametrize("overrides, message", [
    (["data.exposure=[0, 0, 0, 0]"], "shows no group"),
    (["data.exposure=[1, -1, 0, 0]"], "must be >= 0"),
    (["data.exposure=[1, 1]"], "one count per group"),
    (["data.groups=[a, a, b]"], "distinct names"),
    (["data.test_size=960"], "must be below n_facts"),
    (["rl.seed=3"], "rl.seed differs"),
    (["eval.confidence_question=Sure?"], "same confidence_question"),
    (["data.n_factz=3"], "did you mean 'data.n_facts'"),
])
def test_bad_facts_recipe_values_are_one_line(overrides, message):
    with pytest.raises(UserError) as info:
        load_demo_settings(RECIPE, overrides)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_exposure_rows_repeat_each_row_by_its_group():
    train, test = get_task("short_answer").generate(36, seed=0, test_size=12, style="compact")
    copies = {"often": 3, "rarely": 1}  # "never" not named: left out
    rows = exposure_rows(train + test, copies, seed=1)
    expected = Counter()
    for example in train + test:  # by hand
        expected[example.ground_truth["question"]] += copies.get(difficulty_of(example), 0)
    assert Counter(e.ground_truth["question"] for e in rows) == +expected
    assert rows == exposure_rows(train + test, copies, seed=1)
    assert rows != exposure_rows(train + test, copies, seed=2)  # shuffled by the seed


def test_a_fractional_exposure_shows_that_share_of_the_facts_once_more():
    train, test = get_task("short_answer").generate(400, seed=0, test_size=0, style="compact",
                                                    groups=("half",))
    rows = exposure_rows(train, {"half": 1.5}, seed=3)
    shown = Counter(e.ground_truth["question"] for e in rows)
    assert set(shown.values()) == {1, 2} and len(shown) == 400  # every fact once or twice
    assert 0.4 < sum(v == 2 for v in shown.values()) / 400 < 0.6
    assert rows == exposure_rows(train, {"half": 1.5}, seed=3)
    half_of_a_part = exposure_rows(train[:100], {"half": 1.5}, seed=3)
    assert Counter(e.ground_truth["question"] for e in half_of_a_part) == Counter(
        {q: n for q, n in shown.items() if q in {e.ground_truth["question"] for e in train[:100]}})


def test_the_data_stage_shows_the_warm_up_what_it_should(tmp_path):
    settings = load_demo_settings(RECIPE, [*SMALL_WORLD, f"out_dir={tmp_path}"])
    kinds = stage_facts_data(settings, QUIET)
    data = {name: load_examples(tmp_path / f"data/{name}.parquet")
            for name in ("train", "test", "rl", "sft")}
    assert len(data["test"]) == 32 and len(data["train"]) == 96
    exposure = settings.data.copies
    shown = Counter(e.ground_truth["question"] for e in data["sft"])
    for example in data["train"] + data["test"]:
        copies = exposure[difficulty_of(example)]
        assert shown[example.ground_truth["question"]] in (math.floor(copies), math.ceil(copies))
    assert Counter(difficulty_of(e) for e in data["test"]) == dict.fromkeys(exposure, 8)  # 2 countries each
    rl_questions = {e.ground_truth["question"] for e in data["rl"]}
    assert rl_questions == {e.ground_truth["question"] for e in data["train"]}
    assert not ({_country(q) for q in rl_questions}
                & {_country(e.ground_truth["question"]) for e in data["test"]})
    assert kinds["reference"][1.0] == 32 and kinds["no answer tag"][0] == 32
    assert kinds["another answer"][0.1] >= 16


@pytest.mark.slow
def test_facts_demo_end_to_end_with_tiny_budgets(tmp_path):
    report = run_demo(load_demo_settings(RECIPE, [
        *SMALL_WORLD, f"out_dir={tmp_path}", "sft.steps=20", "eval.max_examples=12",
        "rl.optim.total_steps=2", "rl.rollout.prompts_per_step=2",
        "calibrate.steps=3", "calibrate.prompts=4",
        "calibrate.batch_size=4", "calibrate.answer_batch_size=2"]))
    text = report.read_text()
    assert "facts of made-up countries" in text and "Faithfulness probe" not in text
    assert "before RL (SFT)" in text and "after two-turn RLCR" in text
    assert "after the confidence warm-up" in text
    assert "| often |" in text and "difficulty table" in text
    for name in ("eval-before", "eval-calibrated", "eval-after"):
        metrics = json.loads((tmp_path / name / "metrics.json").read_text())
        assert metrics["count"] == 12 * 4 and metrics["mode"] == "two_turn"  # 4 answers each
    # each answer's turn 2 showed the question's three other answers, and only the value is
    # the model's
    rows = [json.loads(line) for line in
            (tmp_path / "eval-after/predictions.jsonl").read_text().splitlines()]
    assert rows and all(not (r["confidence_text"] or "").startswith("<analysis>") for r in rows)
    assert (tmp_path / "rl/final-model/config.json").is_file()
    assert set(json.loads((tmp_path / "timings.json").read_text())) == {
        "data", "supervised warm-up", "evaluation before RL", "confidence warm-up",
        "evaluation after the confidence warm-up", "two-turn RLCR", "evaluation after RL"}
    for image in [line.split("(")[1].rstrip(")") for line in text.splitlines()
                  if line.startswith("![")]:
        assert (tmp_path / image).is_file(), image
