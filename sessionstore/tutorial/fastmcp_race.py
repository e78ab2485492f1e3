"""The FastMCP session races, measured over real HTTP with FastMCP's own ``Client``.

Layer: a test and teaching harness above ``sessionstore.fastmcp.demo`` (used by the tests, the
benchmark and notebook 09, so every figure comes from the same code). Why: the claims -- no lost
key, no resurrected session, no orphan -- are about what clients see, so the race is run the way
clients run it: separate ``fastmcp.Client`` connections, one session, the same moment. Every
race is bounded: a fixed number of rounds and an overall timeout.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

from fastmcp import Client

__all__ = ["EndRace", "SetRace", "end_race", "server_processes", "set_race"]


@dataclass(frozen=True)
class SetRace:
    """``clients`` set one distinct key each of one fresh session, ``rounds`` times."""

    instances: int
    keys: int
    lost: int


@dataclass(frozen=True)
class EndRace:
    """``end_session`` racing ``setters`` sets of one fresh session, ``rounds`` times."""

    rounds: int
    resurrected: int  # rounds after which the ended id still resolved
    orphans: int  # rounds that left state behind the session (``is_orphan``)


async def _connect(
    stack: AsyncExitStack, urls: Sequence[str], n: int, auth: str | None
) -> list[Any]:
    return [
        await stack.enter_async_context(Client(urls[i % len(urls)], auth=auth)) for i in range(n)
    ]


async def _together(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run ``calls`` at the same moment: each waits on one event, then all are released."""
    go = asyncio.Event()

    async def one(call: Callable[[], Awaitable[Any]]) -> Any:
        await go.wait()
        return await call()

    tasks = [asyncio.ensure_future(one(call)) for call in calls]
    await asyncio.sleep(0)  # every task is waiting on the event
    go.set()
    return await asyncio.gather(*tasks)


async def set_race(
    urls: Sequence[str],
    *,
    clients: int = 8,
    rounds: int = 20,
    auth: str | None = None,
    timeout: float = 120.0,
) -> SetRace:
    """Lost keys: each round a new session (``create_session``), then ``clients`` clients --
    spread over ``urls`` in turn -- each ``remember`` one key of it at once, then one read of
    all of them."""
    lost = 0
    async with AsyncExitStack() as stack, asyncio.timeout(timeout):
        conns = await _connect(stack, urls, clients, auth)
        for r in range(rounds):
            sid = (await conns[0].call_tool("create_session", {})).data
            keys = [f"r{r}-c{i}" for i in range(clients)]
            await _together(
                [
                    partial(c.call_tool, "remember", {"session_id": sid, "key": k, "value": k})
                    for c, k in zip(conns, keys, strict=True)
                ]
            )
            got = (await conns[-1].call_tool("recall_many", {"session_id": sid, "keys": keys})).data
            lost += sum(1 for k in keys if got.get(k) != k)
    return SetRace(instances=len(urls), keys=clients * rounds, lost=lost)


async def end_race(
    urls: Sequence[str],
    is_orphan: Callable[[str], Awaitable[bool]],
    *,
    setters: int = 4,
    rounds: int = 20,
    auth: str | None = None,
    timeout: float = 120.0,
) -> EndRace:
    """Each round a new session, then ``end_session`` and ``setters`` ``remember`` calls at once
    (errors are answers here: a set refused after the end is right); then: does the id still
    resolve (a ``recall``), and did ``is_orphan(session_id)`` find state left behind?"""
    resurrected = orphans = 0
    async with AsyncExitStack() as stack, asyncio.timeout(timeout):
        conns = await _connect(stack, urls, setters + 1, auth)
        for r in range(rounds):
            sid = (await conns[0].call_tool("create_session", {})).data
            await conns[0].call_tool("remember", {"session_id": sid, "key": "seed", "value": r})
            calls: list[Callable[[], Awaitable[Any]]] = [
                partial(conns[0].call_tool, "end_session", {"session_id": sid})
            ]
            calls += [
                partial(
                    c.call_tool,
                    "remember",
                    {"session_id": sid, "key": f"k{i}", "value": i},
                    raise_on_error=False,
                )
                for i, c in enumerate(conns[1:])
            ]
            await _together(calls)
            after = await conns[-1].call_tool(
                "recall", {"session_id": sid, "key": "seed"}, raise_on_error=False
            )
            resurrected += not after.is_error
            orphans += await is_orphan(sid)
    return EndRace(rounds=rounds, resurrected=resurrected, orphans=orphans)


#: The server module each ``state`` runs: the store's, or the unconditional one for comparison.
_SERVERS = {"store": "sessionstore.fastmcp", "unconditional": "sessionstore.tutorial.unconditional"}


@asynccontextmanager
async def server_processes(
    n: int,
    endpoint_url: str,
    table: str,
    *,
    state: str = "store",
    start_timeout: float = 60.0,
) -> AsyncIterator[list[str]]:
    """``n`` server processes on one table (``python -m sessionstore.fastmcp``, or with ``state=
    "unconditional"`` its wrong-way twin), each on 127.0.0.1 and a port of its own; their URLs.
    Each start is bounded; each is stopped (SIGTERM, then kill)."""
    procs: list[asyncio.subprocess.Process] = []
    try:
        command = [sys.executable, "-m", _SERVERS[state], "--endpoint-url", endpoint_url]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for _ in range(n):
            procs.append(
                await asyncio.create_subprocess_exec(
                    *command, "--table", table, stdout=asyncio.subprocess.PIPE, env=env
                )
            )
        urls = []
        async with asyncio.timeout(start_timeout):
            for proc in procs:
                assert proc.stdout is not None
                line = (await proc.stdout.readline()).decode()
                if not line.startswith("listening "):
                    raise RuntimeError(f"server process did not start: {line!r}")
                urls.append(line.split()[1])
        yield urls
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.terminate()
        for proc in procs:
            try:
                async with asyncio.timeout(10):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
