"""The package's floors, read from the source: who may import whom.

- bottom: `protocol` (the shared conventions) and `errors` import no other part of calibrl, and
  `settings` (every command's settings) imports only those two;
- lower floors: algo, models, rollout, rewards, tasks, protocol, data, utils, errors, settings; none of
  them imports a middle or top floor, and models does not import rollout;
- middle: training, evaluation and probe import lower floors only, never each other;
- top: demo and the cli (and `python -m calibrl`) may import everything.

Every import counts, including those inside functions (the lazy ones that keep `--help` fast)
and module names written as strings for `importlib` (e.g. `calibrl.models`' lazy exports).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "calibrl"
LOWER = {"algo", "models", "rollout", "rewards", "tasks", "protocol", "data", "utils", "errors",
         "settings"}
MIDDLE = {"training", "evaluation", "probe"}
TOP = {"demo", "cli", "__main__"}
BOTTOM_MAY_IMPORT = {"protocol": {"protocol", "errors"}, "errors": {"errors"},
                     "settings": {"settings", "protocol", "errors"}}
MODULE_STRING = re.compile(r"calibrl(\.\w+)+")


def _part(module: str) -> str | None:
    """'calibrl.rollout.sampling' -> 'rollout'; None for modules outside calibrl."""
    parts = module.split(".")
    return parts[1] if parts[0] == "calibrl" and len(parts) > 1 else None


def _imported(path: Path) -> Iterator[str]:
    """Every calibrl module `path` imports, however it imports it."""
    here = path.relative_to(SRC).with_suffix("").parts
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if MODULE_STRING.fullmatch(node.value):
                yield node.value


def _edges() -> dict[str, set[tuple[str, str]]]:
    """Per part of the package: the other parts it imports, with the file that does it."""
    edges: dict[str, set[tuple[str, str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        source = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if source == "__init__":
            continue  # the package's own docstring-only __init__
        for module in _imported(path):
            target = _part(module)
            if target is not None and target != source:
                edges.setdefault(source, set()).add((target, str(rel)))
    return edges


EDGES = _edges()


def _violations(sources: set[str], allowed) -> list[str]:
    return sorted(f"{file} imports calibrl.{target}"
                  for source in sources for target, file in EDGES.get(source, ())
                  if not allowed(source, target))


def test_every_part_of_the_package_has_a_floor():
    parts = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    parts |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert parts <= LOWER | MIDDLE | TOP, parts - (LOWER | MIDDLE | TOP)


def test_the_walk_sees_lazy_and_string_imports():
    """The checker itself: it must find imports that only run inside a function or by name."""
    assert ("models", "cli/probe_cmd.py") in EDGES["cli"]  # imported inside the command
    assert ("protocol", "models/__init__.py") in EDGES["models"]  # an importlib string


def test_lower_floors_import_no_middle_or_top_floor():
    assert _violations(LOWER, lambda s, t: t in LOWER) == []


@pytest.mark.parametrize("bottom", sorted(BOTTOM_MAY_IMPORT))
def test_the_bottom_imports_nothing_above_it(bottom):
    assert _violations({bottom}, lambda s, t: t in BOTTOM_MAY_IMPORT[s]) == []


def test_models_do_not_import_rollout():
    """Prompt texts the tokenizer corpus needs come from `protocol`, not from rollout."""
    assert _violations({"models"}, lambda s, t: t != "rollout") == []


def test_training_evaluation_and_probe_import_only_lower_floors():
    assert _violations(MIDDLE, lambda s, t: t in LOWER) == []
