"""The MCP layer's shape, read from its source: no parameter that is never read, no module that
repeats a core module's name, and no forwarding of the core's claims -- only their traced runs.

Static checks over ``sessionstore/mcp``, ``sessionstore/fastmcp`` and ``sessionstore/conformance``
(the integrations over the core); nothing runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sessionstore
from sessionstore import claims, leases
from sessionstore.mcp import traced

PACKAGE = Path(sessionstore.__file__).parent
LAYERS = ("mcp", "fastmcp", "conformance")

#: Annotations of parameters a function declares for someone else to read: the interceptor
#: takes ``SessionHandle`` and ``IdempotencyKey`` from a tool's arguments (the tool declares
#: them so clients see them in its schema).
READ_BY_THE_INTERCEPTOR = {"SessionHandle", "IdempotencyKey"}
#: The first parameter of a handler whose signature the MCP SDK sets: ``(ctx, params)``.
SDK_HANDLER = "ServerRequestContext"


def _functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _annotation(arg: ast.arg) -> str:
    return "" if arg.annotation is None else ast.unparse(arg.annotation)


def _implements_an_interface(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A dunder, a method whose body only says it is not implemented here (a base class), or a
    handler whose signature is the SDK's."""
    if fn.name.startswith("__") and fn.name.endswith("__"):
        return True
    body = [s for s in fn.body if not isinstance(s, ast.Expr)]  # the docstring aside
    if len(body) == 1 and isinstance(body[0], ast.Raise):
        raised = body[0].exc
        name = raised.func if isinstance(raised, ast.Call) else raised
        if isinstance(name, ast.Name) and name.id == "NotImplementedError":
            return True
    positional = [a for a in fn.args.posonlyargs + fn.args.args if a.arg not in ("self", "cls")]
    return bool(positional) and _annotation(positional[0]).startswith(SDK_HANDLER)


def _unread(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = fn.args
    every = args.posonlyargs + args.args + args.kwonlyargs
    every += [a for a in (args.vararg, args.kwarg) if a is not None]
    read = {n.id for statement in fn.body for n in ast.walk(statement) if isinstance(n, ast.Name)}
    return [
        a.arg
        for a in every
        if a.arg not in ("self", "cls")
        and not a.arg.startswith("_")
        and _annotation(a) not in READ_BY_THE_INTERCEPTOR
        and a.arg not in read
    ]


def test_no_parameter_of_the_integrations_goes_unread() -> None:
    unread = [
        f"{path.relative_to(PACKAGE)}:{fn.lineno} {fn.name}({name})"
        for layer in LAYERS
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for fn in _functions(path)
        if not _implements_an_interface(fn)
        for name in _unread(fn)
    ]
    assert unread == []


def test_the_scan_finds_a_parameter_never_read() -> None:
    source = "def f(used, unused, _ignored, *, handle: SessionHandle = None):\n    return used\n"
    (fn,) = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef)]
    assert _unread(fn) == ["unused"]
    assert not _implements_an_interface(fn)


def test_no_module_of_the_mcp_layer_takes_the_name_of_a_core_pattern() -> None:
    """A reader who meets ``claims`` or ``leases`` finds one module under that name."""
    core = {p.stem for p in PACKAGE.glob("*.py")}
    ours = {p.stem for p in (PACKAGE / "mcp").glob("*.py")}
    # ``errors`` and ``client`` hold the MCP side of the same concern (our errors as MCP errors,
    # the aware client on ``mcp.Client``); the patterns the core teaches are named once.
    assert ours & core <= {"__init__", "__main__", "errors", "client"}


def test_the_mcp_layer_runs_the_cores_claims_measured_and_forwards_nothing() -> None:
    """Each of ``traced``'s operations is the core's own function, measured as an operation of
    its own (``functools.wraps`` keeps the function it wraps): no second signature to keep."""
    assert {name: getattr(traced, name).__wrapped__ for name in traced.__all__} == {
        "claim": claims.claim,
        "start_round": claims.start_round,
        "suspend_round": claims.suspend_round,
        "complete": claims.complete,
        "put_record": claims.put_record,
        "renew_lease": leases.renew,
    }
