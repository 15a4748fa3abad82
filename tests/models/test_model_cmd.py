"""`calibrl model init` through the typer app."""

from __future__ import annotations

from transformers import AutoModelForCausalLM
from typer.testing import CliRunner

from calibrl.cli.model_cmd import app
from calibrl.errors import UserError

SMALL = ["--hidden-size", "32", "--num-layers", "2", "--num-heads", "2", "--max-positions", "128"]


def test_init_writes_a_loadable_model(tmp_path):
    out = tmp_path / "tiny"
    result = CliRunner().invoke(app, ["init", "--out", str(out), *SMALL, "--seed", "4"])
    assert result.exit_code == 0, result.output
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.hidden_size == 32 and model.config.num_hidden_layers == 2
    assert f"{model.num_parameters():,} parameters" in result.output


def test_init_refuses_a_non_empty_folder_unless_overwrite(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    result = CliRunner().invoke(app, ["init", "--out", str(tmp_path), *SMALL])
    assert isinstance(result.exception, UserError)
    result = CliRunner().invoke(app, ["init", "--out", str(tmp_path), *SMALL, "--overwrite"])
    assert result.exit_code == 0, result.output


def test_init_bad_sizes_are_user_errors(tmp_path):
    result = CliRunner().invoke(app, ["init", "--out", str(tmp_path), "--hidden-size", "30"])
    assert isinstance(result.exception, UserError)
    assert "not divisible" in str(result.exception)
    assert not any(tmp_path.iterdir())


def test_init_needs_out():
    result = CliRunner().invoke(app, ["init"])
    assert result.exit_code == 2


def test_init_fits_the_tokenizer_to_the_task_asked_for(tmp_path):
    from transformers import AutoTokenizer

    vocab = {}
    for task in ("countdown", "numeric_qa"):
        result = CliRunner().invoke(app, ["init", "--out", str(tmp_path / task), *SMALL,
                                          "--task", task])
        assert result.exit_code == 0, result.output
        vocab[task] = AutoTokenizer.from_pretrained(tmp_path / task).get_vocab()
    assert "Ġapples" in vocab["numeric_qa"] and "Ġapples" not in vocab["countdown"]
    default = tmp_path / "default"
    assert CliRunner().invoke(app, ["init", "--out", str(default), *SMALL]).exit_code == 0
    # The default is Countdown's tokenizer, byte for byte.
    assert ((default / "tokenizer.json").read_bytes()
            == (tmp_path / "countdown" / "tokenizer.json").read_bytes())


def test_init_unknown_task_is_a_user_error(tmp_path):
    result = CliRunner().invoke(app, ["init", "--out", str(tmp_path / "m"), "--task", "nope"])
    assert isinstance(result.exception, UserError)
    assert "unknown data_source 'nope'" in str(result.exception)
