"""The one loader of every command: a YAML file, then typed options, then `key=value` overrides.

Values of overrides are read as YAML scalars (`1e-5`, `true`, `null`, `[1, 2]` get their types);
later sources win. Any problem is one `UserError` line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from calibrl.errors import UserError, missing_file
from calibrl.settings.base import (
    Section,
    describe_error,
    describe_problem,
    leaf_fields,
    section_type,
)

S = TypeVar("S", bound=Section)


def _set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise UserError(f"override '{key}': '{part}' is not a section")
        node = child
    node[parts[-1]] = value


def dotted_tree(values: Mapping[str, Any]) -> dict[str, Any]:
    """`{"a.b": 1, "c": 2}` -> `{"a": {"b": 1}, "c": 2}`."""
    tree: dict[str, Any] = {}
    for key, value in values.items():
        _set_dotted(tree, key, value)
    return tree


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """`["a.b=1", "c=x"]` -> nested dict, values parsed as YAML scalars."""
    tree: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"override '{item}' is not key=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, bool) and raw.strip().lower() not in ("true", "false"):
            value = raw.strip()  # YAML 1.1 reads yes/no/on/off as booleans; keep the word
        _set_dotted(tree, key.strip(), value)
    return tree


def merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`extra` over `base`, section by section."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def read_yaml(path: str | Path) -> dict[str, Any]:
    """The mapping a settings file holds."""
    path = Path(path)
    if not path.is_file():
        raise missing_file(path)
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise UserError(f"config file {path} is not UTF-8 text (byte {err.start})") from None
    except yaml.YAMLError as err:
        raise UserError(f"config file {path} is not valid YAML: {str(err).splitlines()[0]}"
                        ) from None
    if loaded is not None and not isinstance(loaded, dict):
        raise UserError(f"config file {path} must hold a mapping, not {type(loaded).__name__}")
    return loaded or {}


def _settings_tree(path: str | Path | None, overrides: list[str] | None,
                   options: Mapping[str, Any] | None) -> dict[str, Any]:
    tree = read_yaml(path) if path is not None else {}
    tree = merge(tree, dotted_tree(options or {}))
    tree = merge(tree, parse_overrides(overrides or []))
    for key in tree:
        if not isinstance(key, str):
            raise UserError(f"config key {key!r} is not a name")
    return tree


def load_settings(cls: type[S], path: str | Path | None = None,
                  overrides: list[str] | None = None,
                  options: Mapping[str, Any] | None = None) -> S:
    """`cls` from an optional YAML file, typed options (dotted keys) and `key=value` overrides."""
    return cls.create(**_settings_tree(path, overrides, options))


# Stands in for a required text setting left out, so that the rest can still be shown.
NOT_SET = "<required>"


@dataclass(frozen=True)
class ShownSettings:
    """What `--print-config` shows: the settings as far as they are given.

    Attributes:
        settings: every value given, the rest at its default; a required text setting not
            given holds `NOT_SET`.
        not_set: the dotted keys of the required settings not given.
        unmet: a check across several settings that the values do not pass yet (e.g. sft's
            "give steps and/or minutes"); None when there is none.
    """

    settings: Section
    not_set: tuple[str, ...] = ()
    unmet: str | None = None


def load_settings_to_show(cls: type[S], path: str | Path | None = None,
                          overrides: list[str] | None = None,
                          options: Mapping[str, Any] | None = None) -> ShownSettings:
    """As `load_settings`, but what is not given yet does not stop it: a required setting left
    out, or a check across settings not met, is named beside the settings instead (what
    `--print-config` shows before the user has named a model or a data file). A wrong value or
    an unknown key is a `UserError`, as without `--print-config`."""
    tree = _settings_tree(path, overrides, options)
    try:
        return ShownSettings(cls(**tree))
    except ValidationError as err:
        first = err
    gaps = tuple(_dotted(p["loc"]) for p in first.errors() if p["type"] == "missing")
    if not gaps:
        if _across_settings(first):
            return ShownSettings(_unchecked(cls, tree), (), _unmet(first, cls))
        raise UserError(describe_error(first, cls)) from None
    if len(gaps) != first.error_count():
        wrong = next(p for p in first.errors() if p["type"] != "missing")
        raise UserError(describe_problem(wrong, cls)) from None
    filled = merge(tree, dotted_tree({key: _stand_in(cls, key) for key in gaps}))
    try:
        return ShownSettings(cls(**filled), gaps)
    except ValidationError as err:
        if _across_settings(err):
            return ShownSettings(_unchecked(cls, filled), gaps, _unmet(err, cls))
        # A required setting that is not text (a recipe's numbers) takes no stand-in: then the
        # error is the one without --print-config.
        raise UserError(describe_error(first, cls)) from None


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _stand_in(cls: type[Section], key: str) -> Any:
    """`NOT_SET` as the field of `key` holds it (a field of several texts: one)."""
    return (NOT_SET,) if get_origin(leaf_fields(cls)[key].annotation) is tuple else NOT_SET


def _unmet(err: ValidationError, cls: type[Section]) -> str:
    return describe_error(err, cls).removeprefix("config: ")


def _across_settings(err: ValidationError) -> bool:
    """Whether every problem is the whole settings' own check (no field named)."""
    return all(not p["loc"] for p in err.errors())


def _unchecked(cls: type[S], tree: Mapping[str, Any]) -> S:
    """`cls` with its own checks across settings skipped: each value was valid on its own
    (pydantic runs those checks only then); sections are built, and checked, as usual."""
    values = {}
    for name, value in tree.items():
        inner = section_type(cls.model_fields[name])
        values[name] = inner(**value) if inner is not None and isinstance(value, dict) else value
    return cls.model_construct(**values)


def updated(settings: S, values: Mapping[str, Any]) -> S:
    """A validated copy of `settings` with `values` (dotted keys) replaced."""
    return type(settings).create(**merge(settings.model_dump(), dotted_tree(values)))


def dump_settings(settings: BaseModel) -> str:
    """The resolved settings as YAML (what every run directory records)."""
    return yaml.safe_dump(settings.model_dump(mode="json"), sort_keys=False)
