"""The embedded engine's modules import one another in one direction: no import circle.

A circle (``checks`` importing ``keys`` for its patches while ``keys`` imported its refusal from
``checks``) makes a module's meaning depend on which was imported first. Every import counts here,
a function's own as well as the module's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sessionstore.engine

ENGINE = Path(sessionstore.engine.__file__).parent


def _imports(path: Path) -> set[str]:
    """The engine modules ``path`` imports, anywhere in it (relative or absolute)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(alias.name for alias in node.names)
            elif node.module and node.module.startswith("sessionstore.engine."):
                found.add(node.module.split(".")[2])
            elif node.module == "sessionstore.engine":
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("sessionstore.engine."):
                    found.add(alias.name.split(".")[2])
    return found


def _graph() -> dict[str, set[str]]:
    modules = {p.stem: p for p in ENGINE.glob("*.py") if p.stem != "__init__"}
    return {name: _imports(path) & set(modules) for name, path in modules.items()}


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph``, as the path round it, or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        path.append(name)
        for other in sorted(graph[name]):
            if state.get(other) == 1:
                return [*path[path.index(other) :], other]
            if other not in state:
                found = visit(other)
                if found:
                    return found
        state[name] = 2
        path.pop()
        return None

    for name in sorted(graph):
        if name not in state:
            found = visit(name)
            if found:
                return found
    return None


def test_the_graph_sees_the_imports_it_must() -> None:
    graph = _graph()
    assert "keys" in graph["checks"]  # checks wires the key checks into its patches
    assert "refusals" in graph["keys"]


def test_no_engine_module_imports_one_that_imports_it_back() -> None:
    assert _circle(_graph()) is None


def test_a_circle_is_found_when_there_is_one() -> None:
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
