"""The package's shape, as its layout promises (docs/layout.md): the bounds on its size, what may
import what, no parameter that is never used, and a stated public API.

The rule of the public API: a module is public when it states ``__all__``, and what it states
there is what a user may import from it; a module without ``__all__`` is inside the package and
may change without notice. The package's own ``__all__`` is the short way in. These tests hold
the code, the notebooks, the README and the docs to that rule.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import sessionstore

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sessionstore"

#: Each part of the package and the most lines it may hold.
BOUNDS = {"mcp": 3000, "fastmcp": 800, "cli": 900}
STORE_BOUND = 7000  # ``sessionstore/*.py``: the store itself
TUTORIAL_BOUND = 1100  # ``sessionstore/tutorial``
MODULE_BOUND = 400
#: Modules that may be longer, each named with the reason it reads better whole: none today.
LONG_ON_PURPOSE: set[str] = set()
#: The classroom, the test kits and the conformance server: the store never imports them.
ABOVE_THE_STORE = (
    "sessionstore.tutorial",
    "sessionstore.conformance",
    "sessionstore.testing",
    "tests",
)
#: The parts above the store, free to import each other and the store.
TOP = ("sessionstore/tutorial/", "sessionstore/conformance/", "sessionstore/testing/")


def _lines(paths: list[Path]) -> int:
    return sum(len(p.read_text().splitlines()) for p in paths)


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def test_each_part_within_its_bound() -> None:
    store = _lines(sorted(PACKAGE.glob("*.py")))
    assert store < STORE_BOUND, f"sessionstore/*.py: {store} lines"
    for part, bound in BOUNDS.items():
        lines = _lines(sorted((PACKAGE / part).rglob("*.py")))
        assert lines <= bound, f"sessionstore/{part}: {lines} lines, bound {bound}"


@pytest.mark.xfail(
    strict=True, reason="the tutorial's code is over its bound; the bound awaits a decision"
)
def test_the_tutorial_within_its_bound() -> None:
    lines = _lines(sorted((PACKAGE / "tutorial").rglob("*.py")))
    assert lines <= TUTORIAL_BOUND, f"sessionstore/tutorial: {lines} lines"


def test_no_module_over_its_bound() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MODULE_BOUND
    }
    assert set(long) <= LONG_ON_PURPOSE, long


def _imports(path: Path) -> set[str]:
    """The absolute names of the modules ``path`` imports."""
    package = _name(path) if path.name == "__init__.py" else _name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{a.name}" for a in node.names}
    return found


def test_nothing_of_the_store_imports_the_tutorial_the_tests_or_the_conformance_server() -> None:
    wrong = {
        str(p.relative_to(ROOT)): sorted(
            m for m in _imports(p) if m.startswith(ABOVE_THE_STORE) and m != "sessionstore"
        )
        for p in _modules()
        if not str(p.relative_to(ROOT)).startswith(TOP)
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def _callbacks(tree: ast.AST) -> set[str]:
    """Names used as values, not called: a function handed to someone who calls it (a hook, a
    merge, an exercise's stub), whose signature its caller fixes."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    values = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Name | ast.Attribute)
        and isinstance(n.ctx, ast.Load)
        and id(n) not in called
    ]
    return {n.id if isinstance(n, ast.Name) else n.attr for n in values}


def _plain(decorator: ast.expr) -> bool:
    """A decorator that leaves the signature the function's own."""
    return ast.unparse(decorator) in {"staticmethod", "classmethod", "property", "contextmanager"}


def _overrides(module: ModuleType, cls_name: str, method: str) -> bool:
    cls = getattr(module, cls_name, None)
    return inspect.isclass(cls) and any(method in vars(base) for base in cls.__mro__[1:])


def test_no_parameter_is_never_used() -> None:
    """Every parameter is read by its function, but where the signature is someone else's: a
    method that overrides its base's (a plan's ``request``, ``__exit__``), a function handed to
    its caller as a value (a hook, a handler, an exercise's stub), or one a decorator registers
    (a tool, whose parameters its clients see)."""
    unused = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        module = importlib.import_module(_name(path))
        callbacks = _callbacks(tree)
        owners = {
            id(f): c.name
            for c in ast.walk(tree)
            if isinstance(c, ast.ClassDef)
            for f in c.body
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if fn.name in callbacks or (fn.name.startswith("__") and fn.name.endswith("__")):
                continue
            if fn.decorator_list and not all(_plain(d) for d in fn.decorator_list):
                continue  # registered with what calls it: a tool, a route, a handler
            owner = owners.get(id(fn))
            if owner is not None and _overrides(module, owner, fn.name):
                continue
            body = [
                s
                for s in fn.body
                if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
            ]
            if all(isinstance(s, ast.Pass | ast.Raise) for s in body):
                continue  # a protocol's or an abstract method's stub
            read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
            arguments = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
            unused += [
                f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}({a.arg})"
                for a in arguments
                if a.arg not in {"self", "cls"} and not a.arg.startswith("_") and a.arg not in read
            ]
    assert unused == []


def test_no_pattern_takes_memory_beside_its_table() -> None:
    """A pattern function takes the ``Table`` it works on, which holds this instance's memory:
    no signature threads the memory by hand."""
    threaded = [
        f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}"
        for path in _modules()
        for fn in ast.walk(ast.parse(path.read_text()))
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        if a.arg == "memory" or (a.annotation is not None and "Memory" in ast.unparse(a.annotation))
    ]
    assert threaded == []


def _public() -> dict[str, ModuleType]:
    """Every module of the package that states ``__all__``."""
    found = {}
    for info in pkgutil.walk_packages(sessionstore.__path__, "sessionstore."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        module = importlib.import_module(info.name)
        if hasattr(module, "__all__"):
            found[info.name] = module
    return found


def test_what_each_public_module_states_is_there() -> None:
    public = _public() | {"sessionstore": sessionstore}
    missing = {
        name: [n for n in module.__all__ if not hasattr(module, n)]
        for name, module in public.items()
    }
    assert {k: v for k, v in missing.items() if v} == {}


def test_the_modules_the_notebooks_teach_are_public() -> None:
    taught = re.findall(r"^``(\w+)``\s+.+\s+0\d$", inspect.getdoc(sessionstore.store) or "", re.M)
    assert len(taught) >= 10
    assert {f"sessionstore.{m}" for m in taught} <= set(_public())


def _sources() -> list[tuple[str, list[str]]]:
    """The code a user reads, one list of sources per page, in order (a notebook's cells share
    their imports): the notebooks, and the README's and the docs' examples."""
    pages = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        pages.append((path.name, ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]))
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        pages.append((path.name, re.findall(r"```python\n(.*?)```", path.read_text(), re.S)))
    return pages


def _uses(sources: list[str]) -> list[tuple[str, str]]:
    """``(module, name)`` for each name a page takes from the package: imported, or read as an
    attribute of the package or of one of its modules (``ss.item.Meta``)."""
    aliases = {"sessionstore": "sessionstore", "ss": "sessionstore"}
    uses = []
    for source in sources:
        lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("sessionstore"):
                        aliases[a.asname or a.name] = a.name
                        if a.name != "sessionstore":
                            module, _, name = a.name.rpartition(".")
                            uses.append((module, name))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "sessionstore"
            ):
                for a in node.names:
                    uses.append((node.module or "", a.name))
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                owner = _module_of(node.value, aliases)
                if owner is not None:
                    uses.append((owner, node.attr))
    return uses


def _module_of(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The package's module ``node`` names (``ss``, ``ss.item``, ``schema``), or None."""
    if isinstance(node, ast.Name):
        module = aliases.get(node.id)
    elif isinstance(node, ast.Attribute):
        outer = _module_of(node.value, aliases)
        module = None if outer is None else f"{outer}.{node.attr}"
    else:
        return None
    if module is None:
        return None
    try:
        return module if inspect.ismodule(importlib.import_module(module)) else None
    except ImportError:
        return None


def _prose() -> list[tuple[str, str]]:
    """Where the README, the docs and the notebooks' text name a part of the package in full
    (``sessionstore.mcp.protocol.SessionHandle``), with the page that names it."""
    texts = [(p.name, p.read_text()) for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]]
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        cells = json.loads(path.read_text())["cells"]
        texts.append(
            (
                path.name,
                "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown"),
            )
        )
    return [
        (name, m) for name, text in texts for m in re.findall(r"`(sessionstore(?:\.\w+)+)", text)
    ]


def test_the_text_names_only_what_is_public() -> None:
    """A dotted name of the package in the text is a public module, or a name its module states
    in ``__all__`` (a metric named like the package, ``sessionstore.requests``, is no module)."""
    public = _public() | {"sessionstore": sessionstore}
    inside = []
    for where, dotted in _prose():
        parts = dotted.split(".")
        modules = [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
        module = next(m for m in modules if _is_module(m))
        rest = dotted[len(module) + 1 :].split(".")[0] if dotted != module else ""
        if rest and not hasattr(importlib.import_module(module), rest):
            continue  # not Python: a metric or span attribute named like the package
        if module not in public or (rest and rest not in public[module].__all__):
            inside.append(f"{where}: {dotted}")
    assert sorted(set(inside)) == []


def _is_module(name: str) -> bool:
    try:
        return inspect.ismodule(importlib.import_module(name))
    except ImportError:
        return False


def test_users_import_only_what_is_public() -> None:
    public = _public() | {"sessionstore": sessionstore}
    packages = {name for name, m in public.items() if hasattr(m, "__path__")}
    inside = []
    for where, sources in _sources():
        for module, name in _uses(sources):
            if module not in public:
                if module.rpartition(".")[0] in packages and module.rpartition(".")[2]:
                    inside.append(f"{where}: {module} (a module without __all__)")
                continue
            submodule = f"{module}.{name}"
            if name not in public[module].__all__ and submodule not in public:
                inside.append(f"{where}: {module}.{name}")
    assert sorted(set(inside)) == []
