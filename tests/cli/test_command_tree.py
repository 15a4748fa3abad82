"""The command tree is built once per process, however often `main` is called in it."""

from __future__ import annotations

from calibrl.cli import main as cli


def _tree_size() -> tuple[int, int, int]:
    groups = cli.app.registered_groups
    nested = sum(len(g.typer_instance.registered_commands) for g in groups)
    return len(cli.app.registered_commands), len(groups), nested


def test_repeated_main_calls_do_not_grow_the_command_tree(capsys):
    # Each call used to append every command again, so the n-th call parsed n copies of the tree.
    cli.main(["--help"])
    first = _tree_size()
    assert first[0] >= 6 and first[1] >= 2  # demo/sft/train/eval/compare/probe; data, model
    for _ in range(20):
        cli.main(["data", "--help"])
    assert _tree_size() == first
    assert "numeric-qa" in capsys.readouterr().out
