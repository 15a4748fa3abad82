"""The package's floors, read from the source: who may import whom.

- lower floors, bottom up: errors | protocol | settings, utils | data | tasks | rewards, models |
  algo | rollout. A part imports only parts on floors below its own (parts on one floor import
  neither each other): `protocol` (the shared conventions) and `errors` import no other part of
  calibrl, `settings` (every command's settings) only those two; `data` is storage (the
  `TaskExample` value, parquet and JSON readers) and knows no task, while `tasks` reads and
  writes rows through their tasks; rewards and models ask the tasks; algo scores with the
  rewards; rollout runs the engines and builds rollout trees (`algo`) of examples (`data`);
- middle: training, evaluation and probe import lower floors only, never each other;
- top: demo and the cli (and `python -m calibrl`) may import everything;
- between modules, not only between parts, no import circle: a floor may import itself, but
  none of its modules may come back round to itself.

Every import counts, including those inside functions (the lazy ones that keep `--help` fast)
and module names written as strings for `importlib` (e.g. `calibrl.models`' lazy exports).
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "calibrl"
LOWER_FLOORS = (("errors",), ("protocol",), ("settings", "utils"), ("data",), ("tasks",),
                ("rewards", "models"), ("algo",), ("rollout",))
FLOOR = {part: level for level, floor in enumerate(LOWER_FLOORS) for part in floor}
LOWER = set(FLOOR)
MIDDLE = {"training", "evaluation", "probe"}
TOP = {"demo", "cli", "__main__"}
BOTTOM_MAY_IMPORT = {"protocol": {"protocol", "errors"}, "errors": {"errors"},
                     "settings": {"settings", "protocol", "errors"}}
MODULE_STRING = re.compile(r"calibrl(\.\w+)+")


def _part(module: str) -> str | None:
    """'calibrl.rollout.sampling' -> 'rollout'; None for modules outside calibrl."""
    parts = module.split(".")
    return parts[1] if parts[0] == "calibrl" and len(parts) > 1 else None


def _imported(path: Path, src: Path = SRC) -> Iterator[str]:
    """Every calibrl name `path` imports, however it imports it; `from m import x` gives `m.x`,
    a module or a name in one."""
    here = path.relative_to(src).with_suffix("").parts
    package = here if path.name == "__init__.py" else here[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[:len(package) - node.level + 1]) if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield from (f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if MODULE_STRING.fullmatch(node.value):
                yield node.value


def _edges(src: Path = SRC) -> dict[str, set[tuple[str, str]]]:
    """Per part of the package: the other parts it imports, with the file that does it."""
    edges: dict[str, set[tuple[str, str]]] = {}
    package = src / "calibrl"
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        source = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if source == "__init__":
            continue  # the package's own docstring-only __init__
        for module in _imported(path, src):
            target = _part(module)
            if target is not None and target != source:
                edges.setdefault(source, set()).add((target, str(rel)))
    return edges


def _module_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Per module of the package: the modules it imports.

    `from m import x` is an edge to `m.x` when that is a module, else to `m`; importing a
    submodule is not an edge to the packages around it: Python runs those for any import, so
    counting them would make every package that re-exports its submodules a circle.
    """
    paths = {}
    for path in sorted((src / "calibrl").rglob("*.py")):
        parts = path.relative_to(src).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        targets = set()
        for module in _imported(path, src):
            while module and module not in paths:  # `m.x` with x a name in module `m`
                module = module.rpartition(".")[0]
            targets.add(module)
        graph[name] = targets - {"", name}
    return graph


def _find_circle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One circle of `graph` as `[a, b, ..., a]`, or None when there is none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                return path[path.index(nxt):] + [nxt]
            if nxt not in done:
                circle = visit(nxt)
                if circle:
                    return circle
        path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        if node not in done:
            circle = visit(node)
            if circle:
                return circle
    return None


EDGES = _edges()
MODULES = _module_graph()


def _violations(sources: set[str], allowed, edges=None) -> list[str]:
    edges = EDGES if edges is None else edges
    return sorted(f"{file} imports calibrl.{target}"
                  for source in sources for target, file in edges.get(source, ())
                  if not allowed(source, target))


def _below(source: str, target: str) -> bool:
    return target in FLOOR and FLOOR[target] < FLOOR[source]


def test_every_part_of_the_package_has_a_floor():
    parts = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    parts |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert parts <= LOWER | MIDDLE | TOP, parts - (LOWER | MIDDLE | TOP)
    assert sum(map(len, LOWER_FLOORS)) == len(LOWER)  # no part on two floors


def test_the_walk_sees_lazy_and_string_imports():
    """The checker itself: it must find imports that only run inside a function or by name."""
    assert ("models", "cli/probe_cmd.py") in EDGES["cli"]  # imported inside the command
    assert ("protocol", "models/__init__.py") in EDGES["models"]  # an importlib string
    assert "calibrl.tasks.countdown" in MODULES["calibrl.tasks.registry"]  # inside a function
    assert "calibrl.rollout.hf_engine" in MODULES["calibrl.rollout.factory"]
    assert "calibrl.protocol.tags" in MODULES["calibrl.models"]  # an importlib string
    assert "calibrl.tasks" in MODULES["calibrl.algo.scoring"]  # `from calibrl.tasks import f`


def test_lower_floors_import_no_middle_or_top_floor():
    assert _violations(LOWER, lambda s, t: t in LOWER) == []


def test_each_lower_floor_imports_only_the_floors_below_it():
    assert _violations(LOWER, _below) == []


@pytest.mark.parametrize("bottom", sorted(BOTTOM_MAY_IMPORT))
def test_the_bottom_imports_nothing_above_it(bottom):
    assert _violations({bottom}, lambda s, t: t in BOTTOM_MAY_IMPORT[s]) == []


def test_models_do_not_import_rollout():
    """Prompt texts the tokenizer corpus needs come from `protocol`, not from rollout."""
    assert _violations({"models"}, lambda s, t: t != "rollout") == []


def test_training_evaluation_and_probe_import_only_lower_floors():
    assert _violations(MIDDLE, lambda s, t: t in LOWER) == []


def test_no_import_circle_between_modules():
    circle = _find_circle(MODULES)
    assert circle is None, " -> ".join(circle)


def test_the_circle_check_finds_a_planted_circle():
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": set()}
    assert _find_circle(graph) == ["a", "b", "c", "a"]
    assert _find_circle({**graph, "c": set()}) is None
    assert _find_circle({"a": {"a"}}) == ["a", "a"]


def _copy_of(tmp_path: Path, part: str) -> Path:
    """A source root holding a copy of one part of the package."""
    shutil.copytree(PACKAGE / part, tmp_path / "calibrl" / part,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _plant(path: Path, module: str) -> None:
    """Add a lazy import of `module` at the end of `path`."""
    with path.open("a", encoding="utf-8") as f:
        f.write(f"\n\ndef _planted():\n    import {module}  # noqa: F401\n")


def test_a_lazy_import_that_closes_a_circle_is_found(tmp_path):
    """Putting the factory back into the engine interface brings back the circle."""
    src = _copy_of(tmp_path, "rollout")
    assert _find_circle(_module_graph(src)) is None
    _plant(src / "calibrl/rollout/engine.py", "calibrl.rollout.hf_engine")
    circle = _find_circle(_module_graph(src))
    assert circle and {"calibrl.rollout.engine", "calibrl.rollout.hf_engine"} <= set(circle)


def test_an_import_of_a_higher_floor_is_found(tmp_path):
    src = _copy_of(tmp_path, "data")
    assert _violations({"data"}, _below, _edges(src)) == []
    _plant(src / "calibrl/data/example.py", "calibrl.tasks.registry")
    assert _violations({"data"}, _below, _edges(src)) == [
        "data/example.py imports calibrl.tasks"]
