"""How a command's typed options relate to its settings: one loader, defaults and help from fields.

Each command declares an `OptionMap` for its settings class; `OptionMap.option` makes a typer
option whose default and help are the field's, and `OptionMap.load` reads the settings from
`--config FILE`, then the options given on the command line, then `key=value` overrides (later
wins). An option left at its default sets nothing, so a config file's value stands.
`tests/cli/test_options_match_settings.py` walks every command's options against its fields.

Every command also takes `--print-config`: print the resolved settings, each field with its
help text (`calibrl.settings.describe`), and exit 0 without running; a required setting not
given yet is marked, not an error, so the defaults can be seen before anything is named.

The help of the `key=value` argument shows an example of the command's own (`OptionMap.example`),
checked against its settings when the command is declared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from calibrl.settings.base import Section, field_at
from calibrl.settings.describe import describe_settings
from calibrl.settings.loader import (
    ShownSettings,
    load_settings,
    load_settings_to_show,
    parse_overrides,
)

# The parameters every command has besides its typed options.
CONFIG_PARAM = "config"
OVERRIDES_PARAM = "overrides"
PRINT_CONFIG_PARAM = "print_config"
COMMON_PARAMS = (CONFIG_PARAM, OVERRIDES_PARAM, PRINT_CONFIG_PARAM)
# Compared by name: typer's click and an installed click each have their own enum.
_GIVEN = ("COMMANDLINE", "ENVIRONMENT")
_FROM_FIELD = object()


def config_option() -> Any:
    return typer.Option(None, "--config", "-c", help="YAML settings file; typed options and "
                        "key=value overrides apply on top of it.")


def overrides_argument(example: str) -> Any:
    """The `key=value ...` argument; `example` is shown in its help (a valid one for the
    command: see `OptionMap.example`)."""
    return typer.Argument(None, help="Settings as dotted key=value (values read as YAML), "
                          f"applied last, e.g. {example}.", show_default=False)


def print_config_option() -> Any:
    return typer.Option(False, "--print-config", help="Print the resolved settings (config "
                        "file, options and overrides applied), every field with its help "
                        "text, and exit without running; required settings not given yet are "
                        "marked, not an error.")


def print_config_and_exit(ctx: typer.Context, settings: Section | ShownSettings) -> None:
    """With `--print-config`: print `settings` with every field's help (what is not given yet
    marked) and exit 0."""
    if ctx.params.get(PRINT_CONFIG_PARAM):
        shown = settings if isinstance(settings, ShownSettings) else ShownSettings(settings)
        typer.echo(describe_settings(shown.settings, shown.not_set, shown.unmet), nl=False)
        raise typer.Exit(0)


def plain(value: Any) -> Any:
    """A command-line value as settings hold it: paths as text, lists as tuples."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return tuple(plain(v) for v in value)
    return value


@dataclass(frozen=True)
class OptionMap:
    """The typed options of one command and the settings fields they set.

    Attributes:
        settings: the command's settings class.
        keys: parameter name -> dotted settings key, where the two differ.
        convert: parameter name -> function from the command-line value to the settings value,
            where `plain` is not enough (e.g. a mix written as NAME=VALUE,...).
        extra: parameters that set no field (e.g. `sft --check`, what to do after training).
        example: `key=value` overrides shown in the help as an example; each key must be a
            setting of `settings` (checked here, so a renamed setting fails at import).
    """

    settings: type[Section]
    keys: Mapping[str, str] = field(default_factory=dict)
    convert: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    extra: frozenset[str] = frozenset()
    example: str = ""

    def __post_init__(self) -> None:
        for item in self.example.split():
            field_at(self.settings, item.partition("=")[0])  # a UserError names the key
        parse_overrides(self.example.split())

    def overrides_argument(self) -> Any:
        """The command's `key=value ...` argument, with its example in the help."""
        return overrides_argument(self.example)

    def key(self, name: str) -> str:
        return self.keys.get(name, name)

    def value(self, name: str, value: Any) -> Any:
        """The settings value of parameter `name` given `value` on the command line."""
        return self.convert.get(name, plain)(value)

    def option(self, name: str, *flags: str, shown: Any = _FROM_FIELD, more_help: str = ""
               ) -> Any:
        """A typer option with the field's default and help; `shown` replaces the default by
        its command-line text (e.g. a tuple written as "0,0.5,1")."""
        info = field_at(self.settings, self.key(name))
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        return typer.Option(default if shown is _FROM_FIELD else shown, *flags,
                            help=f"{info.description}{more_help}")

    def given(self, ctx: typer.Context) -> dict[str, Any]:
        """Dotted key -> value of the typed options given on the command line."""
        return {self.key(name): self.value(name, value) for name, value in ctx.params.items()
                if name not in (*COMMON_PARAMS, *self.extra)
                and getattr(ctx.get_parameter_source(name), "name", None) in _GIVEN}

    def load(self, ctx: typer.Context, then: list[str] | None = None) -> Any:
        """The command's settings: config file, then given options, then overrides (and
        `then`, overrides a command adds for a shortcut flag). With `--print-config` they are
        printed and the command exits here."""
        overrides = [*(ctx.params.get(OVERRIDES_PARAM) or []), *(then or [])]
        config, given = ctx.params.get(CONFIG_PARAM), self.given(ctx)
        if ctx.params.get(PRINT_CONFIG_PARAM):
            print_config_and_exit(
                ctx, load_settings_to_show(self.settings, config, overrides, given))
        return load_settings(self.settings, config, overrides, given)
