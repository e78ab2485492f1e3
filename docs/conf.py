"""Sphinx configuration of the book: `make docs` (see the Makefile).

The source directory is the repository root, so that the pages' relative links
(``../notebooks/01_schema_design.ipynb``, ``../README.md``) are the same on a forge and in the
book; only README.md, docs/*.md and notebooks/*.ipynb are read. The notebooks are rendered from
their committed outputs: nothing is executed, nothing is fetched.

The API reference (docs/api.md) is generated from the package's docstrings by autodoc, which
imports the package from this checkout (the docs extra brings the MCP SDK and FastMCP, so the
integrations import as they run): nothing is fetched either.
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from pathlib import Path
from typing import Any

# The package documented is this checkout's, whatever else is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Notebooks written by JupyterLab before cell ids: nbformat fills them in, and says so each time.
warnings.filterwarnings("ignore", message="Cell is missing an id field")

project = "sessionstore"
author = "sessionstore contributors"
copyright = "sessionstore contributors"

root_doc = "docs/index"
include_patterns = ["README.md", "docs/*.md", "notebooks/[0-9][0-9]_*.ipynb"]
exclude_patterns = ["docs/_build", ".venv*", ".node", "**/.ipynb_checkpoints"]

extensions = ["myst_nb", "sphinx_exercise", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]

# The API reference (docs/api.md names each object): members in source order, type hints in the
# description rather than in long signatures.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# The notebooks as committed: their saved outputs are the book's outputs.
nb_execution_mode = "off"
nb_merge_streams = True
# An error output is part of the lesson (cells tagged raises-exception): shown, not a warning.
nb_output_stderr = "show"

myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
# Links to a heading (`page.md#a-heading`) resolve as they do on a forge.
myst_heading_anchors = 3
# A notebook's headings may skip a level (H1, then H3); the page reads the same either way.
suppress_warnings = ["myst.header"]

html_theme = "sphinx_book_theme"
html_title = "sessionstore"
html_theme_options = {
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
}
# Nothing is loaded from the network when a page is viewed (scripts/check_docs.py checks it).
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False
# The top of the output opens the start page.
html_extra_path = ["_extra"]
# On a phone, long code lines wrap instead of scrolling sideways (docs/_static/phone.css).
html_static_path = ["_static"]
html_css_files = ["phone.css"]


def _markdown(text: str, cell_id: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": text}


def _split_heading(text: str) -> tuple[str, str]:
    """A prompt cell's text before and including its last heading line, and the rest."""
    lines = text.splitlines()
    headings = [i for i, line in enumerate(lines) if line.startswith("#")]
    if not headings:
        return "", text
    cut = headings[-1] + 1
    return "\n".join(lines[:cut]), "\n".join(lines[cut:]).strip()


def _title(heading: str, prompt: str) -> tuple[str, str]:
    """An exercise's title and its prompt: the heading's words after "Exercise"
    (``### Exercise: the key of a tool call``), else the prompt's bold lead, taken out of it
    (``**1 · The reservation.** Write ...``)."""
    last = heading.splitlines()[-1] if heading else ""
    title = re.sub(r"^#+\s*(\d+\s*·\s*)?Exercises?\s*[:·]?\s*", "", last).strip()
    if title:
        return title, prompt
    lead = re.match(r"\*\*(.+?)\.?\*\*\s*", prompt)
    if lead:
        return lead.group(1), prompt[lead.end() :]
    return "", prompt


def _notebook_for_the_book(app: Any, docname: str, source: list[str]) -> None:
    """What a notebook shows in the book and JupyterLab shows its own way; the notebook file is
    not changed, only the text Sphinx reads.

    * A cell whose input JupyterLab keeps collapsed (``jupyter.source_hidden``: a solution, the
      call that draws a picture) shows collapsed here too, behind a click (``hide-input``).
    * An exercise (its prompt, the markdown cell before the cell tagged ``exercise``, and that
      cell) is a sphinx-exercise ``exercise``, and the cell tagged ``solution`` after it its
      ``solution``, whose code opens on "Show solution". A heading of the prompt cell stays
      outside, so that the page's contents still list the exercise.
    """
    if not docname.startswith("notebooks/"):
        return
    notebook = json.loads(source[0])
    stem = docname.rsplit("/", 1)[-1][:2]
    cells: list[dict[str, Any]] = []
    exercises = 0
    for cell in notebook.get("cells", []):
        metadata = cell.setdefault("metadata", {})
        tags = metadata.setdefault("tags", [])
        if metadata.get("jupyter", {}).get("source_hidden") and "hide-input" not in tags:
            tags.append("hide-input")
        label = f"nb{stem}-exercise-{exercises}"
        if "exercise" in tags:
            exercises += 1
            label = f"nb{stem}-exercise-{exercises}"
            before, prompt = "", ""
            if cells and cells[-1]["cell_type"] == "markdown":
                before, prompt = _split_heading("".join(cells.pop()["source"]))
                if before:
                    cells.append(_markdown(before, f"{label}-heading"))
            title, prompt = _title(before, prompt)
            start = f"```{{exercise-start}} {title}\n:label: {label}\n:nonumber:\n```"
            cells.append(_markdown(f"{start}\n\n{prompt}", label))
            cells += [cell, _markdown("```{exercise-end}\n```", f"{label}-end")]
            continue
        if "solution" in tags and exercises:
            metadata.setdefault("mystnb", {}).update(
                code_prompt_show="Show solution", code_prompt_hide="Hide solution"
            )
            cells += [_markdown(f"```{{solution-start}} {label}\n```", f"{label}-solution"), cell]
            cells.append(_markdown("```{solution-end}\n```", f"{label}-solution-end"))
            continue
        cells.append(cell)
    notebook["cells"] = cells
    source[0] = json.dumps(notebook)


def _jupyter_anchors(app: Any, doctree: Any) -> None:
    """Notebooks link each other's headings as JupyterLab names them (``#The-source-design``:
    the heading's text, spaces as hyphens); make those names resolve in the book as well, to
    the same sections as MyST's own anchors."""
    docname = app.env.docname
    if not docname.startswith("notebooks/"):
        return
    slugs = app.env.metadata[docname].get("myst_slugs")
    if not slugs:
        return
    for entry in list(slugs.values()):
        jupyter = entry[2].strip().replace(" ", "-")
        slugs.setdefault(jupyter, entry)


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", _notebook_for_the_book)
    app.connect("doctree-read", _jupyter_anchors)
    return {"parallel_read_safe": True}
