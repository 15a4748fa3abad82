"""The README and docs/usage.md name exactly the commands that read settings.

Issue 43: the README said every command reads `--config`, its options, then `key=value` and
has `--print-config`; `calibrl data …` and `calibrl model init` take none of them. Here the
commands named in the sentence that says which do are the commands that have `--print-config`
and `--config`, and the ones it says take options only have neither.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer

from calibrl.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> dict[str, list]:
    """Top-level command name -> the click commands under it (a group: all its subcommands)."""
    cli._register()
    found: dict[str, list] = {}

    def leaves(command) -> list:
        subs = getattr(command, "commands", None)
        return [leaf for sub in subs.values() for leaf in leaves(sub)] if subs else [command]

    for name, command in typer.main.get_command(cli.app).commands.items():
        found[name] = leaves(command)
    return found


def _reads_settings(command) -> bool:
    names = {p.name for p in command.params}
    return {"config", "print_config"} <= names


def _named(doc: Path, phrase: str) -> set[str]:
    """The command names in backticks in the paragraph of `doc` that holds `phrase`."""
    text = " ".join(doc.read_text(encoding="utf-8").split())
    start = text.index(phrase)
    sentence = text[text.rfind(". ", 0, start) + 2:text.index(". ", start)]
    return {m.split()[-1] if m.startswith("calibrl ") else m
            for m in re.findall(r"`((?:calibrl )?[a-z]+)(?: …)?`", sentence)}


@pytest.mark.parametrize("doc", ["README.md", "docs/usage.md"])
def test_the_docs_name_the_commands_that_read_settings(doc):
    commands = _commands()
    reading = {name for name, leaves in commands.items() if all(map(_reads_settings, leaves))}
    options_only = {name for name, leaves in commands.items()
                    if not any(map(_reads_settings, leaves))}
    assert reading | options_only == set(commands)  # no group is half one, half the other
    assert _named(ROOT / doc, "read their settings") == reading
    assert _named(ROOT / doc, "take their options only") == options_only
