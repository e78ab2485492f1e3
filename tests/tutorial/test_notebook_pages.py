"""The core notebooks read as pages, on a laptop and on a phone: no line of code or output wider
than ``COLUMNS`` (the book's code column; wider lines scroll sideways), no set-up noise as the
first output, an opening that says what the notebook teaches, what it needs and how long it
takes, words linked to the glossary where the glossary has them, and at least one picture
drawn from the notebook's own run, with alt text, its drawing call folded away in the book."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = sorted((ROOT / "notebooks").glob("0[1-5]_*.ipynb"))
GLOSSARY = ROOT / "docs" / "glossary.md"
COLUMNS = 88
#: Cells whose source and output are an exercise's (the stub, the solution and the checker's
#: verdict, all from ``sessionstore.tutorial``).
EXERCISE_TAGS = {"exercise", "solution"}
GLOSSARY_LINK = re.compile(r"\]\(\.\./docs/glossary\.md(?:#([\w-]+))?\)")


def _cells(path: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = json.loads(path.read_text())["cells"]
    return cells


def _tags(cell: dict[str, Any]) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _output_text(output: dict[str, Any]) -> str:
    kind = output["output_type"]
    if kind == "stream":
        return "".join(output["text"])
    if kind == "error":  # what the Minimal traceback shows
        return f"{output['ename']}: {output['evalue']}"
    return "".join(output.get("data", {}).get("text/plain", ""))


def _too_wide(
    path: Path, *, exercises: bool, parts: tuple[str, ...] = ("source", "output")
) -> list[str]:
    found = []
    for n, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "code" or bool(_tags(cell) & EXERCISE_TAGS) != exercises:
            continue
        texts = [("source", "".join(cell["source"]))]
        texts += [("output", _output_text(o)) for o in cell.get("outputs", [])]
        for where, text in texts:
            if where not in parts:
                continue
            found += [
                f"cell {n} {where}, {len(line)} columns: {line[:50]}..."
                for line in text.splitlines()
                if len(line) > COLUMNS
            ]
    return found


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.stem)
def test_code_and_outputs_fit_the_column(path: Path) -> None:
    wide = _too_wide(path, exercises=False)
    assert not wide, f"{path.name}: lines over {COLUMNS} columns:\n" + "\n".join(wide)


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.stem)
def test_exercise_verdicts_fit_the_column(path: Path) -> None:
    wide = _too_wide(path, exercises=True, parts=("output",))
    assert not wide, f"{path.name}: lines over {COLUMNS} columns:\n" + "\n".join(wide)


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.stem)
def test_exercise_code_fits_the_column(path: Path) -> None:
    wide = _too_wide(path, exercises=True, parts=("source",))
    assert not wide, f"{path.name}: lines over {COLUMNS} columns:\n" + "\n".join(wide)


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.stem)
def test_no_set_up_noise_in_the_outputs(path: Path) -> None:
    outputs = [_output_text(o) for c in _cells(path) for o in c.get("outputs", [])]
    noise = [text for text in outputs if text.startswith("Exception reporting mode")]
    assert not noise, f"{path.name}: {noise}"


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.stem)
def test_a_core_notebook_opens_with_what_when_and_how_long(path: Path) -> None:
    first = "".join(_cells(path)[0]["source"])
    for lead in ("**You will learn:**", "**You need first:**", "**Time:**"):
        assert lead in first, f"{path.name}: the first cell has no {lead}"
    assert re.search(r"\*\*Time:\*\* about \d+ minutes", first), path.name


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.stem)
def test_glossary_links_name_its_entries(path: Path) -> None:
    """Every link to the glossary lands on one of its entries (a heading), and every core
    notebook links it."""
    anchors = {
        re.sub(r"[^\w\- ]", "", line[4:].strip().lower()).replace(" ", "-")
        for line in GLOSSARY.read_text().splitlines()
        if line.startswith("### ")
    }
    markdown = "".join("".join(c["source"]) for c in _cells(path) if c["cell_type"] == "markdown")
    links = GLOSSARY_LINK.findall(markdown)
    assert links, f"{path.name}: no link to the glossary"
    unknown = {anchor for anchor in links if anchor and anchor not in anchors}
    assert not unknown, f"{path.name}: no glossary entry for {sorted(unknown)}"


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.stem)
def test_a_picture_of_its_own_run_with_alt_text(path: Path) -> None:
    """At least one cell draws with ``pictures`` and shows a PNG; each such cell has real alt
    text (myst-nb's ``mystnb.image.alt``) and its call folded away in the book."""
    drawing = [c for c in _cells(path) if "pictures." in "".join(c.get("source", []))]
    drawing = [c for c in drawing if c["cell_type"] == "code" and "hide-input" in _tags(c)]
    assert drawing, f"{path.name}: no cell draws a picture"
    for cell in drawing:
        shown = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        assert shown, f"{path.name}: a drawing cell shows no picture"
        alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt", "")
        assert len(alt.split()) >= 20, f"{path.name}: alt text too short: {alt!r}"


def _book_hook() -> Any:
    spec = importlib.util.spec_from_file_location("book_conf", ROOT / "docs" / "conf.py")
    assert spec is not None and spec.loader is not None
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf._notebook_for_the_book


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.stem)
def test_the_book_shows_exercises_as_exercises(path: Path) -> None:
    """What Sphinx reads of a notebook: each exercise a titled sphinx-exercise ``exercise``
    holding its prompt and stub, each solution a ``solution`` whose code opens on "Show
    solution"; every code cell kept, in order."""
    source = [path.read_text()]
    _book_hook()(None, f"notebooks/{path.stem}", source)
    cells = json.loads(source[0])["cells"]
    texts = ["".join(c["source"]) for c in cells]
    stubs = [i for i, c in enumerate(cells) if "exercise" in _tags(c)]
    solutions = [i for i, c in enumerate(cells) if "solution" in _tags(c)]
    assert stubs and len(stubs) == len(solutions), path.name
    for stub, solution in zip(stubs, solutions, strict=True):
        start = texts[stub - 1]
        assert re.match(r"```\{exercise-start\} \S.*\n:label: ", start), start[:80]
        assert texts[stub + 1].startswith("```{exercise-end}")
        assert texts[solution - 1].startswith("```{solution-start}")
        assert texts[solution + 1].startswith("```{solution-end}")
        prompts = cells[solution]["metadata"]["mystnb"]
        assert prompts["code_prompt_show"] == "Show solution"
        assert "hide-input" in _tags(cells[solution])
    code = [c["id"] for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    assert [c["id"] for c in cells if c["cell_type"] == "code"] == code  # every code cell kept


#: A line that decides something: a call, a condition, a comparison.
DECIDES = re.compile(r"\w\(|Condition| = |<=|>=")


def _answer_lines(solution: str, stub: str) -> set[str]:
    """The lines a solution adds to its stub that decide something (``DECIDES``), as a learner
    would have to write them: code only (no comment, no docstring), stripped, ``return`` left
    off."""
    shown = {line.strip() for line in stub.splitlines()}
    answer = set()
    for line in solution.splitlines():
        code = line.split("  # ")[0].strip().removeprefix("return ").strip()
        if line.strip() in shown or code.startswith(("#", '"""', "def ")):
            continue
        if DECIDES.search(code):
            answer.add(code)
    return answer


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.stem)
def test_no_cell_hands_over_the_answer_before_its_exercise(path: Path) -> None:
    """A code line an exercise's solution adds to its stub appears in no code cell (source or
    output) above the exercise."""
    cells = _cells(path)
    stubs = [i for i, c in enumerate(cells) if "exercise" in _tags(c)]
    solutions = [i for i, c in enumerate(cells) if "solution" in _tags(c)]
    for stub, solution in zip(stubs, solutions, strict=True):
        answer = _answer_lines("".join(cells[solution]["source"]), "".join(cells[stub]["source"]))
        assert answer, f"{path.name}: cell {solution} adds nothing to its stub"
        for n, cell in enumerate(cells[:stub]):
            if cell["cell_type"] != "code":
                continue
            texts = ["".join(cell["source"])] + [_output_text(o) for o in cell["outputs"]]
            given = sorted(line for line in answer if any(line in text for text in texts))
            assert not given, f"{path.name}: cell {n}, above the exercise, shows {given}"
