"""The one lookup behind algo's registries (loss aggregations, KL estimators): names to entries."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from calibrl.errors import UserError

Entry = TypeVar("Entry")


def register_named(registry: dict[str, Entry], kind: str, entry: Entry,
                   names: Iterable[str]) -> Entry:
    """Put `entry` under every one of `names`, all or none; a name holds one entry for good."""
    names = tuple(names)
    for name in names:
        if name in registry and registry[name] != entry:
            raise ValueError(f"{kind} {name!r} is already registered")
    registry.update(dict.fromkeys(names, entry))
    return entry


def get_named(registry: dict[str, Entry], kind: str, name: object) -> Entry:
    """The entry registered as `name`; a `UserError` naming the valid ones if none."""
    try:
        return registry[name]  # type: ignore[index]
    except (KeyError, TypeError):  # TypeError: an unhashable value
        raise UserError(f"unknown {kind} {name!r}; choose one of {', '.join(registry)}") from None
