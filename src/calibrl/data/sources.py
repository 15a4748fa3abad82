"""Where data rows come from: local files, folders and Hugging Face Hub data sets.

A source is one of
- a `.parquet`, `.json` or `.jsonl` file: read directly (`read_rows`);
- a folder written by `datasets`' `save_to_disk` (one split), read with `load_from_disk`;
- any other folder: its data files read with `datasets.load_dataset(FOLDER, split=...)`;
- a Hub data set id `org/name`, `org/name:split` or `org/name:config:split` (split `train`
  unless named), read with `datasets.load_dataset` (cached by `datasets` as usual).

Single files stay on the direct reader rather than `load_dataset`: pyarrow gives the file's
rows as written, with no copy converted into the `datasets` cache and no second import of a
large library, and every error names the file and row. `datasets` is imported only when a
folder or a Hub id asks for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibrl.data.parquet import SUFFIXES, read_rows
from calibrl.errors import UserError

DEFAULT_SPLIT = "train"
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+(:[\w.-]+){0,2}$")
_SAVED_MARKERS = ("state.json", "dataset_dict.json")


@dataclass(frozen=True)
class HubSource:
    """A Hub data set: `repo` with an optional `config`, one `split`."""

    repo: str
    config: str | None
    split: str


def hub_source(spec: str) -> HubSource | None:
    """The Hub data set `spec` names, or None when it is a local path (existing or not)."""
    local = Path(spec).expanduser()
    if (local.exists() or spec.startswith((".", "/", "~")) or local.suffix in SUFFIXES
            or not _HUB_ID.match(spec) or Path(spec.split("/")[0]).expanduser().is_dir()):
        return None
    repo, *rest = spec.split(":")
    config, split = (None, DEFAULT_SPLIT) if not rest else (
        (None, rest[0]) if len(rest) == 1 else (rest[0], rest[1]))
    return HubSource(repo, config, split)


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _saved_folder_rows(path: Path) -> list[Any]:
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as err:
        raise UserError(f"{path}: not a folder saved by datasets ({_first_line(err)})") from None
    if isinstance(loaded, datasets.DatasetDict):
        raise UserError(f"{path} holds the splits {', '.join(loaded)}; pass one split's "
                        f"folder, e.g. {path / next(iter(loaded))}")
    return loaded.to_list()


def _load_dataset_rows(what: str, path: str, config: str | None, split: str) -> list[Any]:
    import datasets

    try:
        loaded = datasets.load_dataset(path, config, split=split)
    except Exception as err:  # network, missing repo or split, unreadable files: one line
        raise UserError(f"{what}: cannot load with datasets.load_dataset "
                        f"({_first_line(err)})") from None
    return loaded.to_list()


def read_source_rows(spec: str | Path) -> list[Any]:
    """The raw rows of a file, a folder or a Hub data set id (module docstring)."""
    path = Path(spec).expanduser()
    if path.is_dir():
        if any((path / marker).is_file() for marker in _SAVED_MARKERS):
            return _saved_folder_rows(path)
        return _load_dataset_rows(str(path), str(path), None, DEFAULT_SPLIT)
    hub = hub_source(str(spec))
    if hub is not None:
        return _load_dataset_rows(f"Hub data set {str(spec)!r}", hub.repo, hub.config,
                                  hub.split)
    return read_rows(path)
