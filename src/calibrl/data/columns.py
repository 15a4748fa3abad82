"""Column mapping: rows whose columns carry other names than a converter reads, renamed.

A mapping is `{target: source}`: `target` is a column the reader knows (e.g. short answer's
`question`), `source` the column of the user's data that holds it (e.g. `problem`); the
command line writes it `data.columns.question=problem`. Storage only, like the rest of
`calibrl.data`: the caller says which targets its reader knows.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from calibrl.errors import UserError

SETTING = "data.columns"  # how errors name the mapping (the key the command line sets)


def check_targets(columns: Mapping[str, str], known: Collection[str], reader: str,
                  listed: str | None = None) -> None:
    """`UserError` (one line, with the closest known name) when a target of `columns` is not
    one of the `known` columns that `reader` (e.g. "the short_answer converter") reads;
    `listed` is how the message lists them (default: every name)."""
    for target in columns:
        if target not in known:
            close = difflib.get_close_matches(target, list(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UserError(f"{SETTING}.{target}: {reader} reads no column {target!r}{hint}; "
                            f"it reads {listed or ', '.join(known)}")


def rename_columns(rows: Sequence[Any], columns: Mapping[str, str], where: str) -> list[Any]:
    """`rows` (a list of mappings) with each `columns[target]` source column renamed `target`.

    A row's own column named like a target is replaced by the mapped one (the mapping says
    which column means what); a row that lacks a source column gets no target (as JSON rows
    leave out an optional field). Mappings keep their other columns, and anything that is not
    a mapping stays as it is, for the reader to report. `UserError` naming `where` (the file or
    data set) and the columns present when no row has a source column.
    """
    if not columns or not rows:  # an empty data set is the reader's to report
        return list(rows)
    present = {key for row in rows if isinstance(row, Mapping) for key in row}
    for target, source in columns.items():
        if source not in present:
            listed = ", ".join(sorted(map(str, present))) or "none"
            raise UserError(f"{SETTING}.{target}={source}: {where} has no column {source!r} "
                            f"(its columns: {listed})")
    sources = set(columns.values())
    renamed = []
    for row in rows:
        if isinstance(row, Mapping):
            kept = {k: v for k, v in row.items() if k not in sources and k not in columns}
            row = {**kept, **{t: row[s] for t, s in columns.items() if s in row}}
        renamed.append(row)
    return renamed
