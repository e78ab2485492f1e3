"""``python -m sessionstore.conformance [--port 8765] ...``: the demo MCP server, with the
conformance suite's fixtures, on 127.0.0.1; the options are ``python -m sessionstore.mcp``'s."""

from __future__ import annotations

from ..mcp.__main__ import main
from .fixtures import add_conformance_fixtures

if __name__ == "__main__":
    raise SystemExit(
        main(prog="python -m sessionstore.conformance", extend=add_conformance_fixtures)
    )
