"""The resolved settings as commented YAML: every field's value with its help text above it.

What `calibrl <command> --print-config` prints. The text is a valid settings file: loading it
with `load_settings` gives the same settings back.
"""

from __future__ import annotations

import textwrap

import yaml
from pydantic import BaseModel

from calibrl.settings.base import section_type

WIDTH = 100
INDENT = "  "


def _comment(text: str, indent: str) -> list[str]:
    width = max(WIDTH - len(indent) - 2, 40)
    return [f"{indent}# {line}" for line in textwrap.wrap(" ".join(text.split()), width)]


def _value_lines(name: str, value: object, indent: str) -> list[str]:
    """`name: value` as YAML (a list or a long text may take several lines)."""
    text = yaml.safe_dump({name: value}, sort_keys=False, width=WIDTH - len(indent),
                          allow_unicode=True)
    return [indent + line for line in text.rstrip("\n").splitlines()]


def _section_lines(settings: BaseModel, indent: str) -> list[str]:
    lines: list[str] = []
    values = settings.model_dump(mode="json")
    for name, field in type(settings).model_fields.items():
        if lines and section_type(field) is not None:
            lines.append("")  # a blank line before each nested section
        lines += _comment(field.description or "", indent)
        inner = getattr(settings, name)
        if section_type(field) is not None and isinstance(inner, BaseModel):
            lines.append(f"{indent}{name}:")
            lines += _section_lines(inner, indent + INDENT)
        else:
            lines += _value_lines(name, values[name], indent)
    return lines


def describe_settings(settings: BaseModel) -> str:
    """`settings` as YAML with each field's help text as a comment above it."""
    doc = type(settings).__doc__
    head = _comment(doc.strip().splitlines()[0], "") if doc else []
    return "\n".join([*head, *_section_lines(settings, "")]) + "\n"
