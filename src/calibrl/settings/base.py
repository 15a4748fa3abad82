"""What every settings class shares: unknown keys refused, frozen values, one-line errors.

A section is a pydantic model whose every field has help text. Building one with `create` (as
the loader does for files, options and `key=value` overrides) turns a bad value into one
`UserError` line that names the dotted key (and, for an unknown key, the closest known one).
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from calibrl.errors import UserError

S = TypeVar("S", bound="Section")

# Limits the libraries enforce only when they first use a value (numpy/torch seeds are unsigned
# 32-bit; torch checks Adam's betas when the optimiser is built), refused here at start-up.
SEED_LIMIT = 2**32
Seed = Annotated[int, Field(ge=0, lt=SEED_LIMIT)]
Beta = Annotated[float, Field(ge=0, lt=1)]
AdamBetas = tuple[Beta, Beta]
Probability = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class Section(BaseModel):
    """A group of settings; nested sections are addressed with dotted keys (`optim.lr`)."""

    # No inf/nan anywhere: `optim.lr=.inf` would train an all-NaN model.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @classmethod
    def create(cls: type[S], **values: Any) -> S:
        """`cls(**values)`, any problem as one `UserError` line (the loader's way in)."""
        # Not an `__init__` override: pydantic would then call it for every nested section,
        # and the error would lose the section's part of the dotted key.
        try:
            return cls(**values)
        except ValidationError as err:
            raise UserError(describe_error(err, cls)) from None


def section_type(field: FieldInfo) -> type[BaseModel] | None:
    """The section class a field holds, or None for a plain value."""
    ann = field.annotation
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def leaf_fields(model: type[BaseModel], prefix: str = "") -> dict[str, FieldInfo]:
    """Every setting of `model` by dotted key, sections unfolded: `{"optim.lr": FieldInfo}`."""
    keys: dict[str, FieldInfo] = {}
    for name, field in model.model_fields.items():
        inner = section_type(field)
        if inner is None:
            keys[prefix + name] = field
        else:
            keys.update(leaf_fields(inner, f"{prefix}{name}."))
    return keys


def field_at(model: type[BaseModel], key: str) -> FieldInfo:
    """The field of a dotted key; `UserError` with a suggestion when there is none."""
    fields = leaf_fields(model)
    if key not in fields:
        raise UserError(unknown_key_message(key, model))
    return fields[key]


def redefault(model: type[BaseModel], name: str, default: Any, **changes: Any) -> FieldInfo:
    """`model`'s field `name` (help text and limits) with another default, for a subclass."""
    return FieldInfo.merge_field_infos(model.model_fields[name], default=default, **changes)


def shared_field(model: type[BaseModel], name: str) -> FieldInfo:
    """A copy of `model`'s field `name`, for a section that has the same setting."""
    return FieldInfo.merge_field_infos(model.model_fields[name])


def _closest(key: str, model: type[BaseModel]) -> str | None:
    close = difflib.get_close_matches(key, list(leaf_fields(model)), n=1)
    return close[0] if close else None


def unknown_key_message(key: str, model: type[BaseModel]) -> str:
    close = _closest(key, model)
    hint = f" (did you mean '{close}'?)" if close else ""
    return f"unknown config key '{key}'{hint}"


def describe_error(err: ValidationError, model: type[BaseModel]) -> str:
    """The first problem of a validation error as one line."""
    return describe_problem(err.errors()[0], model)


def describe_problem(first: Any, model: type[BaseModel]) -> str:
    """One problem of a validation error (an entry of `err.errors()`) as one line."""
    where = ".".join(str(p) for p in first["loc"])
    if first["type"] == "extra_forbidden":
        # An unknown section given keys (`eval.reanswers_shown=3` where there is no `eval`)
        # close to no known key: the whole dotted key may be (`reanswers_shown`).
        value, whole = first.get("input"), where
        while isinstance(value, dict) and len(value) == 1:
            inner, value = next(iter(value.items()))
            whole = f"{whole}.{inner}"
        if not _closest(where, model) and _closest(whole, model):
            where = whole
        return unknown_key_message(where, model)
    if first["type"] == "missing":
        return f"missing setting '{where}'"
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "literal_error":
        name = str(first["loc"][-1])
        choices = msg.removeprefix("Input should be ")
        return f"config {where}: unknown {name} {first.get('input')!r}; choose {choices}"
    if where and isinstance(first.get("input"), dict):  # a section's own check names values
        return f"config {where}: {msg}"
    if where:
        return f"config {where}: {msg} (got {first.get('input')!r})"
    return f"config: {msg}"
