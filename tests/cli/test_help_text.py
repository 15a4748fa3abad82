"""Every command's --help prints its text as written: bracketed words such as the extras'
names ("calibrl[math]", "calibrl[vllm]") are text, not markup to drop."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from calibrl.cli import main as cli


def _command_paths() -> list[list[str]]:
    """Every command and subcommand as the words that call it (`["data", "math"]`, ...)."""
    cli._register()
    group = typer.main.get_command(cli.app)
    paths: list[list[str]] = []

    def walk(command, prefix: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            paths.append(prefix + [name])
            walk(sub, prefix + [name])

    walk(group, [])
    return paths


def _help(words: list[str]) -> str:
    result = CliRunner().invoke(cli.app, [*words, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return re.sub(r"\s+", " ", result.output)


def test_the_tree_has_the_commands_whose_help_names_extras():
    paths = _command_paths()
    assert ["probe"] in paths and ["data", "math"] in paths and len(paths) >= 10


@pytest.mark.parametrize("words, extra", [
    (["data", "math"], "calibrl[math]"),
    (["probe"], "calibrl[vllm]"),
])
def test_help_keeps_the_extras_names(words, extra):
    assert extra in _help(words)


def test_every_command_help_keeps_bracketed_text_from_its_docstring_and_options():
    # Whatever the command, a "[word]" written in a help string must appear in its --help.
    group = typer.main.get_command(cli.app)
    checked = 0
    for words in _command_paths():
        command = group
        for word in words:
            command = command.commands[word]
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        written = {m for t in texts for m in re.findall(r"\w+\[\w+\]", t)}
        shown = _help(words)
        for text in written:
            assert text in shown, f"calibrl {' '.join(words)} --help drops {text!r}"
            checked += 1
    assert checked >= 2
