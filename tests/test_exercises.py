"""The exercises of the core notebooks check themselves, both ways.

For every ``Exercise`` in ``sessionstore.exercises.*``: the checker refuses the unsolved stub and
accepts the solution, on the embedded engine; and the notebook named like the module shows the
stub (a cell tagged ``exercise``) and the solution (a cell tagged ``solution``, hidden by default)
as the module holds them. A checker that cannot fail would pass the stub: that fails here.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

import sessionstore.exercises as exercises_package
from sessionstore.exercises import Exercise

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _modules() -> list[Any]:
    names = [m.name for m in pkgutil.iter_modules(exercises_package.__path__)]
    return [importlib.import_module(f"sessionstore.exercises.{name}") for name in sorted(names)]


def _exercises() -> list[tuple[Any, Exercise]]:
    return [
        (module, value)
        for module in _modules()
        for value in vars(module).values()
        if isinstance(value, Exercise)
    ]


def _notebook(module: Any) -> dict[str, Any]:
    short = module.__name__.rsplit(".", 1)[-1]
    (path,) = NOTEBOOKS.glob(f"[0-9][0-9]_{short}.ipynb")
    notebook: dict[str, Any] = json.loads(path.read_text())
    return notebook


def _unnamed(text: str) -> str:
    """Source with every function's name left out: the notebook names the stub and the solution
    alike (the learner's function), the module cannot."""
    return re.sub(r"\bdef \w+\(", "def _(", text)


def _source(fn: Any) -> str:
    return _unnamed(textwrap.dedent(inspect.getsource(fn)).strip())


def test_every_core_notebook_has_an_exercise() -> None:
    names = {m.__name__.rsplit(".", 1)[-1] for m, _ in _exercises()}
    core = {p.stem[3:] for p in NOTEBOOKS.glob("0[1-5]_*.ipynb")}
    assert core <= names, f"core notebooks without an exercise: {sorted(core - names)}"


@pytest.mark.parametrize(("module", "exercise"), _exercises(), ids=lambda v: getattr(v, "name", ""))
def test_the_stub_fails_and_the_solution_passes(
    module: Any, exercise: Exercise, client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    context = module.context(client) if hasattr(module, "context") else (client,)
    assert exercise.verdict(exercise.stub, *context).startswith("Not yet: ")
    assert exercise.verdict(exercise.solution, *context).startswith("Correct: ")
    exercise.check(exercise.stub, *context)  # what the notebook shows
    assert capsys.readouterr().out.startswith("Not yet: ")


@pytest.mark.parametrize(("module", "exercise"), _exercises(), ids=lambda v: getattr(v, "name", ""))
def test_the_notebook_shows_the_stub_and_hides_the_answer(module: Any, exercise: Exercise) -> None:
    cells = _notebook(module)["cells"]
    shown = {
        tag: [
            _unnamed("".join(c["source"]))
            for c in cells
            if tag in c.get("metadata", {}).get("tags", [])
        ]
        for tag in ("exercise", "solution")
    }
    stub, solution = _source(exercise.stub), _source(exercise.solution)
    assert any(stub in text for text in shown["exercise"]), f"{exercise.name}: stub not shown"
    hidden = [
        c
        for c in cells
        if "solution" in c.get("metadata", {}).get("tags", [])
        and solution in _unnamed("".join(c["source"]))
    ]
    assert hidden, f"{exercise.name}: no cell tagged solution holds the solution"
    assert all(c["metadata"].get("jupyter", {}).get("source_hidden") for c in hidden)
