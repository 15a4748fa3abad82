"""What the help shows a user to type is valid for the command that shows it.

Issue 43: the help of `sft`, `train` and `demo` gave the example `temperature=0.7`, which each
of them rejects, and the help of `reanswers_shown` named `calibrate --analysis reanswer`, an
option `calibrate` did not have. Here every `e.g. key=value` of a command's help goes through
that command's own loader, and every command line quoted in a setting's help text
(`` `calibrate --analysis reanswer` ``) is parsed by the command it names.
"""

from __future__ import annotations

import re

import pytest
import typer

from calibrl.cli import main as cli
from calibrl.settings import (
    DemoSettings,
    EvalSettings,
    ProbeSettings,
    SFTSettings,
    TrainSettings,
    load_settings,
)
from calibrl.settings.base import leaf_fields
from calibrl.settings.calibrate import CalibrateSettings
from calibrl.settings.convert import ConvertSettings

# The commands whose key=value settings print with --print-config; the converters of
# `calibrl data` read theirs without it (ConvertSettings).
PRINTABLE = ("train", "sft", "calibrate", "eval", "probe", "demo")
SETTINGS = (TrainSettings, SFTSettings, CalibrateSettings, EvalSettings, ProbeSettings,
            DemoSettings, ConvertSettings)
EXAMPLE = re.compile(r"e\.g\. ((?:[\w.]+=\S+?)(?: [\w.]+=\S+?)*)(?:[.,;]?\s|[.,;]?$)")
QUOTED_COMMAND = re.compile(r"`(?:calibrl )?((?:" + "|".join(PRINTABLE) + r") --[^`]*)`")


def _commands() -> dict[tuple[str, ...], typer.core.TyperCommand]:
    cli._register()
    found: dict[tuple[str, ...], typer.core.TyperCommand] = {}

    def walk(command, words: tuple[str, ...]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            found[(*words, name)] = sub
            walk(sub, (*words, name))

    walk(typer.main.get_command(cli.app), ())
    return found


def _key_value_examples() -> list[tuple[tuple[str, ...], str]]:
    """(command words, example) for each example in a command's key=value argument help."""
    out = []
    for words, command in _commands().items():
        for param in command.params:
            if isinstance(param, typer.core.TyperArgument) and param.nargs == -1:
                text = " ".join((param.help or "").split())
                out += [(words, example) for example in EXAMPLE.findall(text)]
    return out


def _print_config(argv: list[str], capsys) -> str:
    cli.main([*argv, "--print-config"])  # returns on exit code 0, raises SystemExit otherwise
    return capsys.readouterr().out


def test_every_settings_command_shows_an_example():
    commands = {words[0] for words, _ in _key_value_examples()}
    assert set(PRINTABLE) <= commands


@pytest.mark.parametrize("words, example", _key_value_examples(),
                         ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_a_help_example_loads_through_its_own_command(words, example, capsys):
    if words[0] in PRINTABLE:
        printed = _print_config([*words, *example.split()], capsys)
        for item in example.split():
            key, _, value = item.partition("=")
            assert f"{key.rsplit('.', 1)[-1]}: " in printed, item
    else:
        load_settings(ConvertSettings, None, example.split())


def _quoted_commands() -> list[str]:
    quoted = set()
    for cls in SETTINGS:
        for field in leaf_fields(cls).values():
            quoted.update(QUOTED_COMMAND.findall(" ".join((field.description or "").split())))
    for command in _commands().values():
        for text in [command.help or ""] + [getattr(p, "help", "") or "" for p in command.params]:
            quoted.update(QUOTED_COMMAND.findall(" ".join(text.split())))
    return sorted(quoted)


def test_help_texts_quote_commands():
    assert "calibrate --analysis reanswer" in _quoted_commands()


@pytest.mark.parametrize("command", _quoted_commands())
def test_a_command_quoted_in_a_help_text_parses(command, capsys):
    _print_config(command.split(), capsys)
