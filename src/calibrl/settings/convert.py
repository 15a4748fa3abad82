"""`calibrl data <task> --from`: how the rows being converted are read (`key=value` settings
beside the command's options, e.g. `data.columns.question=problem`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from calibrl.settings.base import Section


class ConvertDataSection(Section):
    """How a converter reads the rows of `--from`."""

    columns: dict[str, str] = Field(
        default_factory=dict, description="Columns of the data under other names, as "
        "TARGET: SOURCE: TARGET is a column the task's converter reads (e.g. question, "
        "answer), SOURCE the column of your data that holds it, e.g. "
        "data.columns.question=problem. A TARGET the converter does not read, or a SOURCE "
        "no row has, stops with one line naming the known or present columns.")

    @field_validator("columns", mode="before")
    @classmethod
    def _names_as_text(cls, value: Any) -> Any:
        # `data.columns.level=2` reads the YAML scalar 2: a column's name is text.
        if isinstance(value, dict):
            return {str(k): v if isinstance(v, str) or isinstance(v, bool) or v is None
                    else str(v) for k, v in value.items()}
        return value

    @field_validator("columns")
    @classmethod
    def _non_empty(cls, value: dict[str, str]) -> dict[str, str]:
        for target, source in value.items():
            if not target.strip() or not source.strip():
                raise ValueError(f"a column name is empty in {target!r}: {source!r}; write "
                                 "data.columns.TARGET=SOURCE")
        return value


class ConvertSettings(Section):
    """The `key=value` settings of `calibrl data short-answer|multiple-choice|math`."""

    data: ConvertDataSection = Field(default_factory=ConvertDataSection,
                                     description="How the rows of --from are read.")
