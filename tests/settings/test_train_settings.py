"""Train settings: YAML + overrides, help on every field, one clear line for every bad input."""

import pytest
import yaml

from calibrl.errors import UserError
from calibrl.settings import TrainSettings, dump_settings, load_settings, parse_overrides

# configs/demo*.yaml are demo recipes, not train configs (tests/demo loads them)


def load_config(path=None, overrides=None) -> TrainSettings:
    return load_settings(TrainSettings, path, overrides)


def _all_fields(model):
    for name, field in model.model_fields.items():
        yield name, field
        ann = field.annotation
        if isinstance(ann, type) and hasattr(ann, "model_fields"):
            yield from _all_fields(ann)


def test_every_field_has_help_text():
    assert [name for name, f in _all_fields(TrainSettings) if not f.description] == []


def test_yaml_then_overrides_then_round_trip(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("algorithm:\n  mode: rlcr\n  lambda_conf: 0.5\noptim:\n  lr: 0.001\n")
    cfg = load_config(path, ["optim.lr=3e-4", "rollout.num_generations_answer=6", "seed=7"])
    assert cfg.algorithm.mode == "rlcr" and cfg.algorithm.lambda_conf == 0.5
    assert cfg.optim.lr == pytest.approx(3e-4) and cfg.rollout.num_generations_answer == 6
    assert cfg.seed == 7
    dumped = tmp_path / "dumped.yaml"
    dumped.write_text(dump_settings(cfg))
    assert load_config(dumped) == cfg


def test_override_values_are_typed_by_yaml():
    tree = parse_overrides(["a.b=1", "a.c=true", "d=null", "e=[1, 2]", "f=hello"])
    assert tree == {"a": {"b": 1, "c": True}, "d": None, "e": [1, 2], "f": "hello"}


BAD = [
    (["algorithm.lamda_ans=1"], "unknown config key 'algorithm.lamda_ans' (did you mean 'algorithm.lambda_ans'?)"),
    (["nonsense=1"], "unknown config key 'nonsense'"),
    (["optim.lr=abc"], "config optim.lr:"),
    (["optim.lr=-1"], "config optim.lr:"),
    (["algorithm.mode=ppo"], "config algorithm.mode:"),
    (["rollout.num_generations_confidence=1"], "nothing to normalise per answer"),
    (["rollout.num_generations_answer=1"], "num_generations_answer=1"),
    (["rollout.top_p=1.5"], "config rollout.top_p:"),
    (["rollout.engine=vllm"], "vllm engine needs"),
    (["oops"], "is not key=value"),
    (["optim.lr.x=1"], "config optim.lr:"),
    (["optim=3"], "config optim:"),
    (["algorithm.clip_low=1.0"], "config algorithm.clip_low:"),
    (["algorithm.loss_agg=sum"], "config algorithm.loss_agg: unknown loss aggregation 'sum'"),
    (["algorithm.kl_estimator=k4"], "config algorithm.kl_estimator: unknown KL estimator 'k4'"),
]


@pytest.mark.parametrize("overrides,message", BAD)
def test_bad_configs_give_one_clear_line(overrides, message):
    with pytest.raises(UserError) as info:
        load_config(None, overrides)
    text = str(info.value)
    assert message in text and "\n" not in text


def test_gc1_is_accepted_at_prompt_level():
    cfg = load_config(None, ["rollout.num_generations_confidence=1",
                             "algorithm.confidence_level=prompt"])
    assert cfg.rollout.num_generations_confidence == 1


@pytest.mark.parametrize("content,message", [
    ("a: [1", "not valid YAML"),
    ("- 1\n- 2", "must hold a mapping"),
])
def test_bad_yaml_files(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        load_config(path)


def test_missing_config_file(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_config(tmp_path / "nope.yaml")


def test_shipped_configs_load():
    from pathlib import Path

    configs = sorted(Path(__file__).resolve().parents[2].joinpath("configs").glob("*.yaml"))
    assert len(configs) >= 3
    for path in (p for p in configs if not p.name.startswith("demo")):
        cfg = load_config(path)
        assert yaml.safe_load(dump_settings(cfg))["algorithm"]["mode"] == cfg.algorithm.mode


def test_yaml_words_yes_no_stay_words(tmp_path):
    cfg = load_config(None, ["optim.mixed_precision=no", "logging.tensorboard=false"])
    assert cfg.optim.mixed_precision == "no" and cfg.logging.tensorboard is False
    path = tmp_path / "c.yaml"
    path.write_text("optim:\n  mixed_precision: no\n")
    assert load_config(path).optim.mixed_precision == "no"
