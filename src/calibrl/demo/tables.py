"""Console tables the demos' stages print (kept apart from `report`, which loads matplotlib)."""

from __future__ import annotations

from collections.abc import Mapping

from rich.table import Table


def reward_table(title: str, kinds: Mapping[str, Mapping[float, int]], zero: str) -> Table:
    """The data stage's check of the reward: per kind of answer, how many scored 1.0, 0.1 and
    0 (`zero` names what a 0 means for the task)."""
    table = Table(title=title)
    table.add_column("answer")
    for score in ("1.0 (correct)", "0.1 (format ok)", f"0 ({zero})"):
        table.add_column(score, justify="right")
    for kind, counts in kinds.items():
        table.add_row(kind, str(counts[1.0]), str(counts[0.1]), str(counts[0]))
    return table
