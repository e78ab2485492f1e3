"""python -m sessionstore.mcp [--port 8765]: the demo MCP server on 127.0.0.1.

Streamable HTTP at http://127.0.0.1:<port>/mcp, stateless, sessions in the table. The table is
created if missing, on the endpoint sessionstore.connect() picks: the embedded engine unless
SESSIONSTORE_ENDPOINT_URL or AWS_ENDPOINT_URL_DYNAMODB say otherwise. Several instances on one
table need the same SESSIONSTORE_MCP_STATE_KEYS. "python -m sessionstore.conformance" is the
same server with the MCP conformance suite's fixtures added (make conformance).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import uvicorn
from botocore.exceptions import BotoCoreError, ClientError
from mcp.server.mcpserver import MCPServer

from ..client import connect
from ..errors import SessionStoreError
from ..store import SessionStore
from .server import _LOOPBACK, create_app, create_server
from .sessions import DEFAULT_IDLE_SECONDS

# What a wrong endpoint, table, credential or argument raises while starting: reported as one
# line, because a traceback through boto3 buries the one sentence the operator needs.
# BotoCoreError covers EndpointConnectionError, NoCredentialsError, NoRegionError and the rest;
# ImportError is a missing extra (moto for the embedded engine).
_STARTUP_ERRORS = (SessionStoreError, ClientError, BotoCoreError, ValueError, ImportError)


def main(
    argv: list[str] | None = None,
    *,
    prog: str = "python -m sessionstore.mcp",
    extend: Callable[[MCPServer], None] | None = None,
) -> int:
    """Parse ``argv``, build the server (``extend`` adds to it, as the conformance server's
    fixtures do) and serve until stopped; a start-up error is one line and exit status 2."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=__doc__,  # plain text, shown as written
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--port", type=int, default=8765, help="TCP port (default 8765)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address only")
    parser.add_argument("--table", default="mcp-sessions", help="DynamoDB table name")
    parser.add_argument("--endpoint-url", default=None, help="DynamoDB endpoint (default: env)")
    parser.add_argument("--ttl", type=int, default=3600, help="default session ttl, seconds")
    parser.add_argument(
        "--idle",
        type=int,
        default=DEFAULT_IDLE_SECONDS,
        help="idle timeout of a session, seconds (default 1800, the SDK's; 0: none)",
    )
    args = parser.parse_args(argv)
    if args.host not in _LOOPBACK:
        parser.error("the demo server listens on loopback only (127.0.0.1, ::1, localhost)")
    if not 0 <= args.port <= 65535:
        parser.error("--port must be in 0..65535")
    try:
        server = _build(args)
        if extend is not None:
            extend(server)
    except _STARTUP_ERRORS as exc:
        print(f"{parser.prog}: error: {_one_line(exc)}", file=sys.stderr, flush=True)
        return 2
    print(
        f"sessionstore MCP server on http://{args.host}:{args.port}/mcp (table {args.table!r})",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(create_app(server, host=args.host), host=args.host, port=args.port)
    return 0


def _build(args: argparse.Namespace) -> MCPServer:
    store = SessionStore(connect(args.endpoint_url), args.table)
    store.create_table()
    server = create_server(
        store, default_ttl_seconds=args.ttl, idle_seconds=args.idle or None, log_level="INFO"
    )
    return server


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


if __name__ == "__main__":
    raise SystemExit(main())
