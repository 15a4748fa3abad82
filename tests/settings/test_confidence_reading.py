"""`eval.confidence_reading`: which reading of the stated confidence is the headline; every
demo recipe takes it in its `eval:` section, and the printed settings load back."""

from pathlib import Path
from typing import get_args

import pytest

from calibrl.demo.facts import FactsDemoSettings
from calibrl.demo.real import RealDemoSettings
from calibrl.errors import UserError
from calibrl.evaluation.records import READING_NAMES
from calibrl.settings import DemoSettings, EvalSection, EvalSettings, load_settings
from calibrl.settings.describe import describe_settings

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
RECIPES = {"demo.yaml": DemoSettings, "demo_facts.yaml": FactsDemoSettings,
           "demo_real.yaml": RealDemoSettings}


def test_the_setting_names_the_readings_the_evaluation_knows():
    field = EvalSection.model_fields["confidence_reading"]
    assert set(get_args(field.annotation)) == set(READING_NAMES)
    assert EvalSection().confidence_reading == "sampled"
    assert EvalSection.create(confidence_reading="expected").confidence_reading == "expected"


def test_a_wrong_reading_and_a_mode_without_a_confidence_turn_are_refused():
    with pytest.raises(UserError, match="^config confidence_reading"):
        EvalSection.create(confidence_reading="mean")
    with pytest.raises(UserError, match="mode rlcr has none"):
        EvalSection.create(mode="rlcr", confidence_reading="expected")
    assert EvalSection.create(mode="rlcr").confidence_reading == "sampled"


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_demo_recipe_takes_the_reading_and_prints_it_back(recipe, tmp_path):
    cls = RECIPES[recipe]
    loaded = load_settings(cls, CONFIGS / recipe, ["eval.confidence_reading=expected"])
    assert loaded.eval.confidence_reading == "expected"
    printed = tmp_path / "printed.yaml"
    printed.write_text(describe_settings(loaded))
    assert load_settings(cls, printed) == loaded


def test_eval_settings_print_the_reading_and_load_back(tmp_path):
    loaded = load_settings(EvalSettings, None, ["model=m", "data=d.parquet", "out=o",
                                                "confidence_reading=expected"])
    printed = tmp_path / "printed.yaml"
    printed.write_text(describe_settings(loaded))
    assert "confidence_reading: expected" in printed.read_text()
    assert load_settings(EvalSettings, printed) == loaded
