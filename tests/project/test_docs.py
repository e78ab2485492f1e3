"""The README and the book's pages (docs/*.md), as sources: fast checks that run in `make test`.

The built book is checked by scripts/check_docs.py, which `make docs` runs after building it
(every page there, every link and image resolving, nothing from the network); here: every
notebook and page is in the book's table of contents, every relative link of the README and the
pages resolves on a forge as in the book, the cheat sheet's conditions are the code's, the
README stays a front door, and `make bench` writes into the benchmarks page.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import report
from sessionstore import item, lifecycle, locking, tool_calls, write_tokens
from sessionstore.context import AppendEdit
from sessionstore.models import Status

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.glob("*.md"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
README_MAX_LINES = 220
LINK = re.compile(r"\]\(([^()\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _toctree_entries() -> set[str]:
    index = (DOCS / "index.md").read_text()
    blocks = re.findall(r"```\{toctree\}\n(.*?)```", index, re.S)
    entries = set()
    for block in blocks:
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith(":"):
                target = line.rsplit("<", 1)[-1].rstrip(">") if line.endswith(">") else line
                entries.add(target)
    return entries


def test_every_notebook_and_page_is_in_the_book() -> None:
    entries = _toctree_entries()
    wanted = {f"../notebooks/{p.stem}" for p in NOTEBOOKS}
    wanted |= {p.stem for p in PAGES if p.stem != "index"} | {"../README"}
    assert wanted <= entries, f"not in docs/index.md's toctrees: {sorted(wanted - entries)}"
    assert entries <= wanted, f"toctree entries with no source: {sorted(entries - wanted)}"


def _slug(heading: str) -> str:
    """A heading's anchor as a forge and MyST (``myst_heading_anchors``) both make it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("page", [README, *PAGES], ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    text = FENCE.sub("", page.read_text())
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = page if not path else (page.parent / path).resolve()
        assert resolved.exists(), f"{page.name}: {target} -> no such file"
        if anchor and resolved.suffix == ".md":
            assert anchor in _anchors(resolved), f"{page.name}: {target} -> no such heading"


def test_the_layout_page_names_every_module() -> None:
    """docs/layout.md has a row for each module at the package's top level and each module of
    the tutorial (the per-notebook exercise modules are named by their notebook)."""
    page = (ROOT / "docs" / "layout.md").read_text()
    package = ROOT / "sessionstore"
    notebooks = {p.stem[3:] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    modules = [p for p in package.glob("*.py") if not p.name.startswith("__")]
    modules += [p for p in (package / "tutorial").glob("*.py") if p.stem not in notebooks]
    named = re.findall(r"`([\w/.]+\.py)`", page)
    missing = [
        str(p.relative_to(ROOT))
        for p in modules
        if p.name != "__init__.py"
        and str(p.relative_to(ROOT)) not in named
        and not any(p.name == name for name in named)
    ]
    assert not missing, f"docs/layout.md does not name {sorted(missing)}"


def test_the_readme_is_a_front_door() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md: {len(lines)} lines"
    text = "\n".join(lines)
    for command in ("make lab", "make test", "make docs"):
        assert command in text
    assert "docs/index.md" in text and "docs/cheatsheet.md" in text


# The values a request carries, shown as the cheat sheet names them.
NOW, EXPECTED, TTL, COUNT_ROOM, BYTES_ROOM = (
    900_000_001,
    900_000_005,
    900_000_003,
    900_000_010,
    900_000_020,
)
SHOWN = {
    str(NOW): ":now",
    str(NOW + item.IDLE_SKEW_S): ":now + 1",  # how far idleFrom may be past a writer's clock
    "'OWNER'": ":owner",
    str(EXPECTED): ":expected",
    str(TTL): ":ttl",
    str(COUNT_ROOM): ":count_room",
    str(BYTES_ROOM): ":bytes_room",
}


def _shown(value: object) -> str:
    text = str(value)
    for raw, name in SHOWN.items():
        text = text.replace(raw, name)
    return text


def test_the_cheat_sheets_conditions_are_the_codes() -> None:
    sheet = (DOCS / "cheatsheet.md").read_text()
    append = AppendEdit("s", 1, 1, COUNT_ROOM + 1, BYTES_ROOM + 1)
    idle_update, idle_condition = item.idle_moved(NOW)
    closing = lifecycle.status_in(*lifecycle.sources(Status.CLOSING))
    expected = [
        item.alive("OWNER", NOW),
        item.owned_by(None),
        locking.version_up(),
        locking.version_is(EXPECTED),
        append.condition(),
        tool_calls.id_free(NOW),
        tool_calls.session_ttl(TTL, exact=True),
        lifecycle.status_in(*lifecycle.sources(Status.ACTIVE)),
        closing,
        lifecycle.status_in(*lifecycle.sources(Status.CLOSED)),
        idle_update,
        idle_condition,
        f"size(tk) < {write_tokens.TOKEN_CAP}",
    ]
    for value in expected:
        assert f"`{_shown(value)}`" in sheet, f"cheat sheet: `{_shown(value)}` not found"
    assert "`(attribute_not_exists(pk)) OR (ttl <= :now) OR (incarnation <> :incarnation)`" in sheet
    assert "messageCount = messageCount + :n, contextBytes = contextBytes + :bytes" in sheet
    assert str(append.update()).startswith(
        "SET messageCount = messageCount + 1, contextBytes = contextBytes + 1"
    )


def test_make_bench_writes_into_the_benchmarks_page(tmp_path: Path) -> None:
    assert report.BENCH_PAGE == DOCS / "benchmarks.md"
    page = report.BENCH_PAGE.read_text()
    readme = README.read_text()
    for name in ("bench", "bench-mcp", "bench-mcp-load"):
        assert f"<!-- {name} -->" in page and f"<!-- /{name} -->" in page, name
        assert f"<!-- {name} -->" not in readme, f"README.md still holds the {name} block"
    copy = tmp_path / "benchmarks.md"
    copy.write_text(page)
    assert report.update_block("bench-mcp", "measured", copy)
    assert "<!-- bench-mcp -->\nmeasured\n<!-- /bench-mcp -->" in copy.read_text()


def test_the_mcp_servers_help_is_plain_text() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sessionstore.mcp", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "usage: python -m sessionstore.mcp" in done.stdout
    assert "``" not in done.stdout
