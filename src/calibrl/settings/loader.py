"""The one loader of every command: a YAML file, then typed options, then `key=value` overrides.

Values of overrides are read as YAML scalars (`1e-5`, `true`, `null`, `[1, 2]` get their types);
later sources win. Any problem is one `UserError` line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel

from calibrl.errors import UserError
from calibrl.settings.base import Section

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
        raise UserError(f"config file not found: {path}")
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


def load_settings(cls: type[S], path: str | Path | None = None,
                  overrides: list[str] | None = None,
                  options: Mapping[str, Any] | None = None) -> S:
    """`cls` from an optional YAML file, typed options (dotted keys) and `key=value` overrides."""
    tree = read_yaml(path) if path is not None else {}
    tree = merge(tree, dotted_tree(options or {}))
    tree = merge(tree, parse_overrides(overrides or []))
    for key in tree:
        if not isinstance(key, str):
            raise UserError(f"config key {key!r} is not a name")
    return cls.create(**tree)


def updated(settings: S, values: Mapping[str, Any]) -> S:
    """A validated copy of `settings` with `values` (dotted keys) replaced."""
    return type(settings).create(**merge(settings.model_dump(), dotted_tree(values)))


def dump_settings(settings: BaseModel) -> str:
    """The resolved settings as YAML (what every run directory records)."""
    return yaml.safe_dump(settings.model_dump(mode="json"), sort_keys=False)
