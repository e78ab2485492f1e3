"""``python -m sessionstore.fastmcp``: the FastMCP demo server as a process of its own.

Layer: a runner for ``sessionstore.fastmcp.demo``. Why: "many instances" has to mean processes
too (the tests' two-process race, ``benchmarks.fastmcp``). It binds 127.0.0.1 only, port 0 picks
a free port, and the first line it prints is ``listening <url>``; SIGTERM or SIGINT stops it.
The sessions are kept in the table (``StoreSessionState``); ``main(state=...)`` serves another
state store, as ``python -m sessionstore.tutorial.unconditional`` does to show the wrong way.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Callable
from typing import Any

import sessionstore as ss

from ..aio import AsyncSessionStore
from ..mcp import RunningServer
from . import StoreSessionState
from .demo import create_server

#: Builds the state store the server keeps FastMCP's sessions in: from the store and the options.
StateFactory = Callable[[ss.SessionStore, argparse.Namespace], Any]


def store_state(store: ss.SessionStore, args: argparse.Namespace) -> StoreSessionState:
    return StoreSessionState(AsyncSessionStore(store), ttl_seconds=args.ttl, idle_seconds=args.idle)


async def serve(args: argparse.Namespace, state_factory: StateFactory) -> None:
    store = ss.SessionStore(ss.connect(args.endpoint_url), args.table)
    store.create_table()
    state = state_factory(store, args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with RunningServer(create_server(state).http_app(), port=args.port) as running:
        print(f"listening {running.url}", flush=True)
        await stop.wait()


def main(
    argv: list[str] | None = None,
    *,
    prog: str = "python -m sessionstore.fastmcp",
    state: StateFactory = store_state,
) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--endpoint-url", default=None, help="default: as ss.connect() picks")
    parser.add_argument("--table", default="mcp-sessions")
    parser.add_argument("--ttl", type=int, default=86400, help="a session's absolute cap (s)")
    parser.add_argument("--idle", type=int, default=3600, help="idle expiry (s)")
    args = parser.parse_args(argv)
    asyncio.run(serve(args, state))
    return 0


if __name__ == "__main__":
    sys.exit(main())
