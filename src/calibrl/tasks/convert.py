"""What every file converter shares: reading its rows under the column names it knows, and the
loop that parses each row, drops repeats and splits train/test."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from calibrl.data.columns import check_targets, rename_columns
from calibrl.data.example import TaskExample
from calibrl.data.sources import read_source_rows
from calibrl.errors import UserError
from calibrl.tasks.base import Conversion
from calibrl.tasks.splits import resolve_test_size

Item = TypeVar("Item")


def read_mapped_rows(path: str | Path, columns: Mapping[str, str] | None, *,
                     known: Collection[str], reader: str, listed: str | None = None
                     ) -> list[Any]:
    """The raw rows of a file, folder or Hub data set (`calibrl.data.sources`), each source
    column of `columns` (`{target: source}`) renamed to its target.

    The targets are checked against `known` (the columns `reader`, e.g. "the math converter",
    reads) before anything is read, so a misspelt one costs no download; `UserError` as
    `calibrl.data.columns` says.
    """
    columns = dict(columns or {})
    check_targets(columns, known, reader, listed)
    return rename_columns(read_source_rows(path), columns, str(path))


def convert_rows(rows: Sequence[Any], path: str | Path, *, parse: Callable[[Any], Item],
                 key: Callable[[Item], Hashable],
                 example: Callable[[Item, int, str], TaskExample], n: int | None,
                 test_size: int | None, test_fraction: float | None) -> Conversion:
    """Rows as train/test examples, in file order.

    `parse` turns a row into a problem (`UserError` naming what is wrong, reported with the
    row's position); a problem whose `key` was seen before is dropped; the first `n` kept
    problems (all if None) are split as generated data are, the first test-size rows being the
    test split; `example(problem, index, split)` makes each example.
    """
    if n is not None and n < 1:
        raise UserError(f"n must be at least 1, got {n}")
    seen: set[Hashable] = set()
    kept: list[Item] = []
    duplicates = 0
    for position, row in enumerate(rows):
        if n is not None and len(kept) == n:
            break
        try:
            item = parse(row)
        except UserError as err:
            raise UserError(f"{path} row {position}: {err}") from None
        if key(item) in seen:
            duplicates += 1
            continue
        seen.add(key(item))
        kept.append(item)
    if not kept or (n is not None and len(kept) < n):
        wanted = "" if n is None else f", fewer than n={n}"
        raise UserError(f"{path} has {len(kept)} usable rows{wanted}")
    n_test = resolve_test_size(len(kept), test_size, test_fraction)
    test = [example(item, i, "test") for i, item in enumerate(kept[:n_test])]
    train = [example(item, i, "train") for i, item in enumerate(kept[n_test:])]
    return Conversion(train, test, len(rows), duplicates, unsolvable=0)
