"""The docs' code blocks read as they render, and every shell block is run or says why not.

The slow test (`test_docs_run.py`) runs the shell blocks; these fast checks keep what it reads
honest: pytest-codeblocks and a CommonMark parser (markdown-it-py, as GitHub renders) must find
the same fences with the same text, so a fence that never closes (issue 43: usage.md had one,
and the rest of its section rendered as code) fails here.
"""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from docs.blocks import SHELL, blocks, doc_paths, name

DOCS = doc_paths()


def _rendered_fences(text: str) -> list[tuple[int, str, str]]:
    tokens = MarkdownIt("commonmark").parse(text)
    return [(t.map[0] + 1, t.info.strip(), t.content) for t in tokens if t.type == "fence"]


@pytest.mark.parametrize("doc", DOCS, ids=name)
def test_fences_read_as_they_render(doc):
    read = [(b.line, b.language, b.code) for b in blocks(doc)]
    assert read == _rendered_fences(doc.read_text(encoding="utf-8"))


def test_an_unclosed_fence_is_caught(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```bash\ncalibrl eval\n``` and prose after it\n\n```bash\nls\n```\n")
    assert [(b.line, b.code) for b in blocks(page)] != [
        (line, code) for line, _, code in _rendered_fences(page.read_text())]


@pytest.mark.parametrize("doc", DOCS, ids=name)
def test_commands_are_in_shell_blocks(doc):
    # A calibrl command in a block of another language would never be run.
    for block in blocks(doc):
        if block.language not in SHELL:
            typed = [line for line in block.code.splitlines()
                     if re.match(r"\s*(\$ )?(\.venv/bin/)?calibrl (?!:)", line)]
            assert not typed, f"{block.where}: a command in a '{block.language}' block"


def test_every_shell_block_is_found_and_skips_say_why():
    shell = [b for doc in DOCS for b in blocks(doc) if b.language in SHELL]
    assert len(shell) >= 20
    assert all(b.skip_reason is None or len(b.skip_reason) > 10 for b in shell)


def test_the_readme_is_one_screen():
    # Issue 42: what calibrl is, the two commands, one result table and links; the rest lives
    # in docs/ (results.md, usage.md).
    readme = DOCS[0].read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 120
    assert readme.count("\n| stage |") == 1


def _table_rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ")]


def test_the_readme_table_prints_what_compare_prints():
    # Issue 43: the difficulty table's within-group AUROC read 0.5 where `calibrl compare`
    # prints n/a (a table cannot rank inside a group; nothing was measured).
    from calibrl.evaluation.compare import NOT_APPLICABLE

    rows = _table_rows(DOCS[0].read_text(encoding="utf-8"))
    header = rows[0]
    table = [r for r in rows if r[0].startswith("difficulty table")]
    assert table
    for row in table:
        for title, cell in zip(header, row, strict=True):
            if title.startswith("within"):
                assert cell == NOT_APPLICABLE, title


def test_the_readme_times_are_the_measured_ones():
    # Issue 43: the README said 12–15 minutes in one place and 14.7–15.3 in another; every
    # time it states is one BENCHMARKS.md measured.
    readme = DOCS[0].read_text(encoding="utf-8")
    benchmarks = (DOCS[0].parent / "BENCHMARKS.md").read_text(encoding="utf-8")
    stated = re.findall(r"(\d+(?:\.\d+)?)(?:[–-](\d+(?:\.\d+)?))? min", readme)
    assert stated
    for low, high in stated:
        for value in filter(None, (low, high)):
            assert re.search(rf"\b{re.escape(value)} min\b", benchmarks), value


@pytest.mark.parametrize("command", ["sft", "calibrate", "train", "eval", "probe", "demo"])
def test_the_small_settings_the_docs_run_at_are_valid(command, capsys):
    # The slow docs test appends these to each command; a renamed key fails here in seconds.
    from calibrl.cli.main import main
    from docs.small_calibrl import ROOT_RECIPES, scaled

    for recipe in ROOT_RECIPES if command == "demo" else [None]:
        args = [command, *(["--config", str(recipe)] if recipe else [])]
        main([*scaled(args), "--print-config"])
    assert capsys.readouterr().out
