"""``python -m sessionstore.fastmcp``: the FastMCP demo server as a process of its own.

Layer: a runner for ``sessionstore.fastmcp.demo``. Why: "many instances" has to mean processes
too (the tests' two-process race, ``benchmarks.fastmcp``). It binds 127.0.0.1 only, port 0 picks
a free port, and the first line it prints is ``listening <url>``; SIGTERM or SIGINT stops it.
``--state store`` keeps the sessions in the table (``StoreSessionState``); ``--state
unconditional`` is the wrong way on purpose (``sessionstore.testing.fastmcp_unconditional``),
for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import sessionstore as ss

from ..aio import AsyncSessionStore
from ..mcp import RunningServer
from ..testing.fastmcp_unconditional import UnconditionalPutStore
from . import StoreSessionState
from .demo import create_server


async def serve(args: argparse.Namespace) -> None:
    client = ss.connect(args.endpoint_url)
    store = ss.SessionStore(client, args.table)
    store.create_table()
    state = (
        StoreSessionState(AsyncSessionStore(store), ttl_seconds=args.ttl, idle_seconds=args.idle)
        if args.state == "store"
        else UnconditionalPutStore(client, args.table)
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with RunningServer(create_server(state).http_app(), port=args.port) as running:
        print(f"listening {running.url}", flush=True)
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sessionstore.fastmcp", description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--endpoint-url", default=None, help="default: as ss.connect() picks")
    parser.add_argument("--table", default="mcp-sessions")
    parser.add_argument("--state", choices=("store", "unconditional"), default="store")
    parser.add_argument("--ttl", type=int, default=86400, help="a session's absolute cap (s)")
    parser.add_argument("--idle", type=int, default=3600, help="idle expiry (s)")
    args = parser.parse_args(argv)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
