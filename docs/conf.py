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


def _hide_what_jupyter_hides(app: Any, docname: str, source: list[str]) -> None:
    """A notebook cell whose input JupyterLab keeps collapsed (``jupyter.source_hidden``, as an
    exercise's solution is) shows collapsed in the book too, behind a click (myst-nb's
    ``hide-input`` tag). The notebook file is not changed; only the text Sphinx reads."""
    if not docname.startswith("notebooks/"):
        return
    notebook = json.loads(source[0])
    changed = False
    for cell in notebook.get("cells", []):
        metadata = cell.setdefault("metadata", {})
        if metadata.get("jupyter", {}).get("source_hidden"):
            tags = metadata.setdefault("tags", [])
            if "hide-input" not in tags:
                tags.append("hide-input")
                changed = True
    if changed:
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
    app.connect("source-read", _hide_what_jupyter_hides)
    app.connect("doctree-read", _jupyter_anchors)
    return {"parallel_read_safe": True}
