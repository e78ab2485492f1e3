"""The figures of the README and the book's pages that come from the code are checked against
it, not typed and left.

Every ```NAME` (1,234 ...)`` or ```NAME` = 1,234`` in README.md or docs/*.md, where ``NAME`` (or
``module.NAME``) is a constant of the package, must equal that constant; and the figures derived
from them are recomputed here.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import re
from pathlib import Path

import sessionstore
from sessionstore import sizing
from sessionstore.item import METADATA_OVERHEAD

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEXT = "\n".join(page.read_text() for page in PAGES)
FLAT = " ".join(TEXT.split())  # a sentence as one line, however the page wraps it
FIGURE = re.compile(r"`(?:(\w+)\.)?([A-Z][A-Z0-9_]+)` (?:\(|= )([\d,]+)")


def _constants() -> dict[str, int]:
    found: dict[str, int] = {}
    for info in pkgutil.iter_modules(sessionstore.__path__, "sessionstore."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, int) and not isinstance(value, bool):
                found.setdefault(name, value)
                found[f"{info.name.rsplit('.', 1)[1]}.{name}"] = value
    return found


def test_every_named_constant_in_the_readme_and_docs_is_the_codes() -> None:
    constants = _constants()
    figures = FIGURE.findall(TEXT)
    assert len(figures) >= 4, figures  # the pattern still finds what the pages say
    for module, name, figure in figures:
        key = f"{module}.{name}" if module else name
        assert key in constants, f"a page names {key}, which the package does not have"
        assert int(figure.replace(",", "")) == constants[key], f"{key} = {figure}"


def test_derived_figures() -> None:
    widest_wcu = math.ceil(METADATA_OVERHEAD / sizing.WRITE_UNIT_BYTES)
    assert f"at most {widest_wcu} at its widest, `METADATA_OVERHEAD` = {METADATA_OVERHEAD:,} B" in (
        FLAT
    )
    assert f"refuses one past {sizing.MAX_ITEM_BYTES:,} B" in FLAT
