"""The code blocks of the docs, read with pytest-codeblocks (and checked against CommonMark).

A block is marked in the doc by an HTML comment on the line before its fence, the way
pytest-codeblocks reads it; the docs test knows one mark:

    <!--pytest.mark.skip(reason="needs a GPU and vLLM")-->

A block so marked is not run but checked (`small_calibrl.py dry`): every calibrl command in it
is parsed and its settings loaded, so a renamed option, key or config file still fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_codeblocks import extract_from_file

ROOT = Path(__file__).resolve().parents[2]
SHELL = ("bash", "sh", "shell", "console")


def doc_paths() -> list[Path]:
    """README.md and every page under docs/ (a new page is tested without being listed)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def name(doc: Path) -> str:
    return doc.relative_to(ROOT).as_posix() if doc.is_relative_to(ROOT) else str(doc)


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts, its language, its text and why it is not run."""

    doc: Path
    line: int
    language: str
    code: str
    skip_reason: str | None

    @property
    def where(self) -> str:
        return f"{name(self.doc)}:{self.line}"


def _skip_reason(marks: list[str], where: str) -> str | None:
    reason = None
    for mark in marks:
        decorator = eval(mark, {"__builtins__": {}, "pytest": pytest})  # the doc's own comment
        if decorator.name != "skip" or not decorator.kwargs.get("reason"):
            raise ValueError(f"{where}: only pytest.mark.skip(reason=...) is a docs mark, "
                             f"got {mark}")
        reason = decorator.kwargs["reason"]
    return reason


def blocks(doc: Path) -> list[Block]:
    """Every fenced block of `doc`, in order."""
    found = []
    for block in extract_from_file(doc):
        where = f"{name(doc)}:{block.lineno}"
        found.append(Block(doc, block.lineno, (block.syntax or "").strip(), block.code,
                           _skip_reason(block.marks, where)))
    return found


def shell_blocks(doc: Path) -> list[Block]:
    return [b for b in blocks(doc) if b.language in SHELL]
