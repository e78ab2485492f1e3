"""``python -m sessionstore.mcp [--port 8765]``: the demo MCP server on 127.0.0.1.

Streamable HTTP at ``http://127.0.0.1:<port>/mcp``, stateless, sessions in the table. The
table is created if missing, on the endpoint ``sessionstore.connect()`` picks: the embedded
engine unless ``SESSIONSTORE_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_DYNAMODB`` say otherwise.
Several instances on one table need the same ``SESSIONSTORE_MCP_STATE_KEYS``.
"""

from __future__ import annotations

import argparse
import sys

import uvicorn

from ..client import connect
from ..store import SessionStore
from .server import create_app, create_server

_LOOPBACK = ("127.0.0.1", "::1", "localhost")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sessionstore.mcp", description=__doc__)
    parser.add_argument("--port", type=int, default=8765, help="TCP port (default 8765)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address only")
    parser.add_argument("--table", default="mcp-sessions", help="DynamoDB table name")
    parser.add_argument("--endpoint-url", default=None, help="DynamoDB endpoint (default: env)")
    parser.add_argument("--ttl", type=int, default=3600, help="default session ttl, seconds")
    args = parser.parse_args(argv)
    if args.host not in _LOOPBACK:
        parser.error("the demo server listens on loopback only (127.0.0.1, ::1, localhost)")
    if not 0 <= args.port <= 65535:
        parser.error("--port must be in 0..65535")
    store = SessionStore(connect(args.endpoint_url), args.table)
    store.create_table()
    server = create_server(store, default_ttl_seconds=args.ttl, log_level="INFO")
    print(
        f"sessionstore MCP server on http://{args.host}:{args.port}/mcp (table {args.table!r})",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(create_app(server, host=args.host), host=args.host, port=args.port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
