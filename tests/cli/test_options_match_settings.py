"""Every command's typed options are settings fields: same default, same help, and every field
of a command's settings can be set (typed option or key=value); config file < options < overrides.
"""

import json

import pytest
import typer
import yaml

from calibrl.cli import calibrate_cmd, demo_cmd, eval_cmd, probe_cmd, sft_cmd, train_cmd
from calibrl.cli.main import main
from calibrl.cli.options import COMMON_PARAMS
from calibrl.errors import UserError
from calibrl.settings.base import leaf_fields
from calibrl.settings.loader import load_settings

COMMANDS = {
    "train": (train_cmd.train, train_cmd.TRAIN),
    "sft": (sft_cmd.sft, sft_cmd.SFT),
    "eval": (eval_cmd.evaluate, eval_cmd.EVAL),
    "probe": (probe_cmd.probe, probe_cmd.PROBE),
    "demo": (demo_cmd.demo, demo_cmd.DEMO),
    "calibrate": (calibrate_cmd.calibrate, calibrate_cmd.CALIBRATE),
}


def _click_command(function):
    app = typer.Typer(add_completion=False)
    app.command()(function)
    return typer.main.get_command(app)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_is_a_field_with_its_default_and_help(name):
    function, options = COMMANDS[name]
    fields = leaf_fields(options.settings)
    params = _click_command(function).params
    assert set(COMMON_PARAMS) <= {p.name for p in params}
    for param in params:
        if param.name in COMMON_PARAMS or param.name in options.extra:
            continue
        key = options.key(param.name)
        assert key in fields, f"--{param.name} sets no field of {options.settings.__name__}"
        field = fields[key]
        assert param.help.startswith(field.description), key
        if field.is_required():
            assert param.default is None, key
        else:
            default = field.get_default(call_default_factory=True)
            assert options.value(param.name, param.default) == default, key


@pytest.mark.parametrize("name", COMMANDS)
def test_every_field_can_be_set_by_key_value(name):
    _, options = COMMANDS[name]
    for key, field in leaf_fields(options.settings).items():
        value = None if field.is_required() else field.get_default(call_default_factory=True)
        text = json.dumps(value, default=lambda v: v.__dict__)  # JSON is YAML
        try:
            load_settings(options.settings, None, [f"{key}={text}"])
        except UserError as err:
            assert "unknown config key" not in str(err), key


def test_a_config_file_then_options_then_overrides(tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump({"model": "m", "data": "d", "out": "o", "samples": 3,
                                    "temperature": 0.5, "seed": 4}))
    command = _click_command(eval_cmd.evaluate)
    ctx = command.make_context("eval", ["--config", str(path), "--samples", "5", "seed=9"])
    settings = eval_cmd.EVAL.load(ctx)
    assert (settings.samples, settings.temperature, settings.seed) == (5, 0.5, 9)
    assert settings.max_answer_tokens == 128  # an option left at its default sets nothing


BAD = {
    "sft unknown key": (["sft", "--data", "d", "--out", "o", "--steps", "1", "lrr=1"],
                        "unknown config key 'lrr' (did you mean 'lr'?)"),
    "sft bad value": (["sft", "--data", "d", "--out", "o", "--steps", "0"], "config steps"),
    "sft missing": (["sft", "--out", "o", "--steps", "1"], "missing setting 'data'"),
    "eval unknown key": (["eval", "--model", "m", "--data", "d", "--out", "o", "sample=2"],
                         "unknown config key 'sample' (did you mean 'samples'?)"),
    "eval bad value": (["eval", "--model", "m", "--data", "d", "--out", "o", "--samples", "2"],
                       "repeats one greedy answer"),
    "eval missing file": (["eval", "--config", "no-such.yaml"], "no-such.yaml: no such file"),
    "probe unknown key": (["probe", "--model", "m", "--data", "d", "--out", "o", "sample=2"],
                          "unknown config key 'sample' (did you mean 'samples'?)"),
    "probe bad value": (["probe", "--model", "m", "--data", "d", "--out", "o", "top_p=2"],
                        "config top_p"),
    "demo unknown key": (["demo", "sft.stepz=3"],
                         "unknown config key 'sft.stepz' (did you mean 'sft.steps'?)"),
    "demo bad value": (["demo", "rl.optim.lr=-1"], "config rl.optim.lr"),
    "demo missing file": (["demo", "--config", "no-such.yaml"], "no-such.yaml: no such file"),
    "train missing file": (["train", "--config", "no-such.yaml"], "no-such.yaml: no such file"),
}


@pytest.mark.parametrize("case", BAD)
def test_bad_settings_are_one_line_exit_2(case, capsys):
    argv, expected = BAD[case]
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "Traceback" not in err
    assert expected in err
