"""The MCP layer's shape: no module that repeats a core module's name, and no forwarding of the
core's claims -- only their traced runs. (No parameter goes unread anywhere in the package:
``tests/project/test_package_shape.py``.)
"""

from __future__ import annotations

from pathlib import Path

import sessionstore
from sessionstore import claims, round_trips
from sessionstore.mcp import traced

PACKAGE = Path(sessionstore.__file__).parent


def test_no_module_of_the_mcp_layer_takes_the_name_of_a_core_pattern() -> None:
    """A reader who meets ``claims`` or ``round_trips`` finds one module under that name."""
    core = {p.stem for p in PACKAGE.glob("*.py")}
    ours = {p.stem for p in (PACKAGE / "mcp").glob("*.py")}
    # ``errors`` and ``client`` hold the MCP side of the same concern (our errors as MCP errors,
    # the aware client on ``mcp.Client``); the patterns the core teaches are named once.
    assert ours & core <= {"__init__", "__main__", "errors", "client"}


def test_the_mcp_layer_runs_the_cores_claims_measured_and_forwards_nothing() -> None:
    """Each of ``traced``'s operations is the core's own function, measured as an operation of
    its own (``functools.wraps`` keeps the function it wraps): no second signature to keep."""
    names = ("claim", "start_round", "suspend_round", "complete", "put_record", "renew_lease")
    assert {name: getattr(traced, name).__wrapped__ for name in names} == {
        "claim": claims.claim,
        "start_round": round_trips.start_round,
        "suspend_round": round_trips.suspend_round,
        "complete": claims.complete,
        "put_record": claims.put_record,
        "renew_lease": round_trips.renew,
    }
