"""The resolved settings as commented YAML: every field's value with its help text above it.

What `calibrl <command> --print-config` prints. The text is a valid settings file: loading it
with `load_settings` gives the same settings back. A required setting not given yet is shown
as a commented-out line, `# model: <required>`, and named at the top, so the file loads back
to the same state: everything set but that.
"""

from __future__ import annotations

import textwrap

import yaml
from pydantic import BaseModel

from calibrl.settings.base import section_type
from calibrl.settings.loader import NOT_SET

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


def _section_lines(settings: BaseModel, indent: str, prefix: str,
                   not_set: frozenset[str]) -> list[str]:
    lines: list[str] = []
    values = settings.model_dump(mode="json")
    for name, field in type(settings).model_fields.items():
        if lines and section_type(field) is not None:
            lines.append("")  # a blank line before each nested section
        lines += _comment(field.description or "", indent)
        inner = getattr(settings, name)
        if section_type(field) is not None and isinstance(inner, BaseModel):
            lines.append(f"{indent}{name}:")
            lines += _section_lines(inner, indent + INDENT, f"{prefix}{name}.", not_set)
        elif prefix + name in not_set:
            lines.append(f"{indent}# {name}: {NOT_SET}")
        else:
            lines += _value_lines(name, values[name], indent)
    return lines


def describe_settings(settings: BaseModel, not_set: tuple[str, ...] = (),
                      unmet: str | None = None) -> str:
    """`settings` as YAML with each field's help text as a comment above it; the dotted keys
    `not_set` (required, not given) are named at the top and left commented out, and so is a
    check across settings that they do not pass yet (`unmet`)."""
    doc = type(settings).__doc__
    head = _comment(doc.strip().splitlines()[0], "") if doc else []
    if not_set:
        head += _comment(f"Required, not set yet: {', '.join(not_set)} (give each as an "
                         "option, as key=value or in --config).", "")
    if unmet:
        head += _comment(f"Not runnable as it stands: {unmet}.", "")
    body = _section_lines(settings, "", "", frozenset(not_set))
    return "\n".join([*head, *body]) + "\n"
