"""The tutorial reads as one path: the core notebooks lead with the pattern in its plain form
(at most ``CORE_WORDS`` words before the section of what production adds), every notebook links
the next, and no page carries the project's history."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CORE = [p for p in NOTEBOOKS if p.name[:2] in {"01", "02", "03", "04", "05"}]
#: Where a core notebook's production depth begins: a markdown cell opening with this heading.
PRODUCTION = "## In production"
CORE_WORDS = 1_200
HISTORY = re.compile(
    r"(?i:\bissue \d+|\bissue's\b|previous release|earlier release|since release|\bnot met\b)"
)


def _markdown(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


@pytest.mark.parametrize("path", CORE, ids=lambda p: p.stem)
def test_a_core_notebook_leads_with_its_pattern_in_few_words(path: Path) -> None:
    cells = _markdown(path)
    starts = [i for i, text in enumerate(cells) if text.lstrip().startswith(PRODUCTION)]
    assert starts, f"{path.name}: no '{PRODUCTION}' section"
    words = sum(len(text.split()) for text in cells[: starts[0]])
    assert words <= CORE_WORDS, f"{path.name}: {words} words before '{PRODUCTION}'"


@pytest.mark.parametrize("path", NOTEBOOKS[:-1], ids=lambda p: p.stem)
def test_every_notebook_links_the_next(path: Path) -> None:
    following = NOTEBOOKS[NOTEBOOKS.index(path) + 1].name
    assert f"]({following})" in _markdown(path)[-1], f"{path.name}: no Next link to {following}"


@pytest.mark.parametrize(
    "path",
    [*NOTEBOOKS, ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))],
    ids=lambda p: p.name,
)
def test_no_page_carries_the_projects_history(path: Path) -> None:
    text = "\n".join(_markdown(path)) if path.suffix == ".ipynb" else path.read_text()
    found = HISTORY.findall(text)
    assert not found, f"{path.name}: {found}"
