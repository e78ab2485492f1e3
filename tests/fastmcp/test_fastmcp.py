"""FastMCP servers on the store (``sessionstore.fastmcp``): tools written for FastMCP, run over
real HTTP on 127.0.0.1 with FastMCP's own ``Client``, against the embedded engine.

The races: 8 clients each setting one key of one session at once, over two server processes
(no key lost); ``end_session`` racing sets (never resolves again, nothing left behind). Then
expiry, restart, two principals, the cost of each ``Session`` operation, and bad input.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.auth.providers.jwt import StaticTokenVerifier
from fastmcp.server.sessions import Session
from key_value.aio.adapters.pydantic import PydanticAdapter

import sessionstore as ss
from sessionstore.aio import AsyncSessionStore
from sessionstore.fastmcp import ENDED_TTL_SECONDS, StoreSessionState, attribute_name
from sessionstore.fastmcp.demo import create_server
from sessionstore.mcp import RunningServer
from sessionstore.testing import RequestLog
from sessionstore.tutorial.fastmcp_race import end_race, server_processes, set_race

INVALID = "Invalid or unknown session."
TOKENS = {
    "token-alice": {"client_id": "app", "sub": "alice", "scopes": []},
    "token-bob": {"client_id": "app", "sub": "bob", "scopes": []},
}


@pytest.fixture(autouse=True)
def _quiet_fastmcp() -> Iterator[None]:
    # FastMCP logs every refused call ("Error calling tool"): here refusals are the point.
    logger = logging.getLogger("fastmcp")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


def _sync(timeout: float) -> Callable[[Callable[..., Awaitable[None]]], Callable[..., None]]:
    """A test written as a coroutine, run to the end in its own loop within ``timeout``."""

    def decorate(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> None:
            async def bounded() -> None:
                async with asyncio.timeout(timeout):
                    await test(*args, **kwargs)

            asyncio.run(bounded())

        return run

    return decorate


def _astore(client: Any, table: str, clock: ss.Clock | None = None) -> AsyncSessionStore:
    return AsyncSessionStore(ss.SessionStore(client, table, clock=clock))


@asynccontextmanager
async def _servers(*servers: FastMCP) -> AsyncIterator[list[str]]:
    async with AsyncExitStack() as stack:
        running = [await stack.enter_async_context(RunningServer(s.http_app())) for s in servers]
        yield [r.url for r in running]


async def _call(url: str, tool: str, args: dict[str, Any], auth: str | None = None) -> Any:
    async with asyncio.timeout(30), Client(url, auth=auth) as client:
        return (await client.call_tool(tool, args)).data


@_sync(150)
async def test_race_two_server_processes_loses_no_key(engine: Any, client: Any, table: str) -> None:
    async with server_processes(2, engine.endpoint_url, table) as urls:
        race = await set_race(urls, clients=8, rounds=8, timeout=120)
    assert (race.instances, race.keys, race.lost) == (2, 64, 0)


@_sync(60)
async def test_race_one_instance_loses_no_key(client: Any, table: str) -> None:
    async with _servers(create_server(StoreSessionState(_astore(client, table)))) as urls:
        race = await set_race(urls, clients=8, rounds=5, timeout=60)
    assert (race.keys, race.lost) == (40, 0)


@_sync(90)
async def test_end_racing_sets_never_resurrects_nor_leaves_orphans(client: Any, table: str) -> None:
    stores = [_astore(client, table), _astore(client, table)]
    servers = [create_server(StoreSessionState(s)) for s in stores]

    async def is_orphan(session_id: str) -> bool:
        # Anything but a closed session would be state living on after the end; so would an
        # item whose ttl is more than a minute away.
        current = await stores[0].get_session(session_id, owner="anon")
        items = client.query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"session#{session_id}"}},
            ConsistentRead=True,
        )["Items"]
        bound = time.time() + ENDED_TTL_SECONDS + 5
        late = [item["sk"]["S"] for item in items if int(item["ttl"]["N"]) > bound]
        return current.status is not ss.Status.CLOSED or bool(late)

    async with _servers(*servers) as urls:
        race = await end_race(urls, is_orphan, setters=4, rounds=10, timeout=90)
    assert (race.rounds, race.resurrected, race.orphans) == (10, 0, 0)


@_sync(30)
async def test_expired_session_is_fastmcps_invalid_session(client: Any, table: str) -> None:
    clock = ss.ManualClock("2026-01-01T12:00:00Z")
    state = StoreSessionState(_astore(client, table, clock), ttl_seconds=600, idle_seconds=60)
    async with _servers(create_server(state)) as (url,), Client(url) as c:
        sid = (await c.call_tool("create_session", {})).data
        await c.call_tool("remember", {"session_id": sid, "key": "a", "value": 1})
        clock.advance(seconds=45)  # reading it keeps it alive (a touch)
        assert (await c.call_tool("recall", {"session_id": sid, "key": "a"})).data["value"] == 1
        clock.advance(seconds=59)  # 104 s after the write, 59 s after the read
        assert (await c.call_tool("recall", {"session_id": sid, "key": "a"})).data["value"] == 1
        clock.advance(seconds=91)  # idle past its period and its slack (half of it)
        with pytest.raises(ToolError, match=INVALID):
            await c.call_tool("recall", {"session_id": sid, "key": "a"})
        sid = (await c.call_tool("create_session", {})).data
        for _ in range(12):  # written every 50 s: never idle, but the cap is 600 s
            await c.call_tool("remember", {"session_id": sid, "key": "a", "value": 2})
            clock.advance(seconds=50)
        with pytest.raises(ToolError, match=INVALID):
            await c.call_tool("remember", {"session_id": sid, "key": "a", "value": 3})


@_sync(30)
async def test_ended_and_unknown_sessions_are_invalid(client: Any, table: str) -> None:
    async with (
        _servers(create_server(StoreSessionState(_astore(client, table)))) as (url,),
        Client(url) as c,
    ):
        sid = (await c.call_tool("create_session", {})).data
        assert (await c.call_tool("end_session", {"session_id": sid})).data == "session ended"
        for tool, args in (
            ("recall", {"key": "a"}),
            ("remember", {"key": "a", "value": 1}),
            ("end_session", {}),
        ):
            with pytest.raises(ToolError, match=INVALID):
                await c.call_tool(tool, {"session_id": sid, **args})
        for bogus in ("no-such-session", "x" * 300, "user-" + "0" * 64, "é"):
            with pytest.raises(ToolError, match=INVALID):
                await c.call_tool("recall", {"session_id": bogus, "key": "a"})


@_sync(30)
async def test_state_survives_a_restart(client: Any, table: str) -> None:
    async with _servers(create_server(StoreSessionState(_astore(client, table)))) as (url,):
        sid = await _call(url, "create_session", {})
        await _call(url, "remember", {"session_id": sid, "key": "plan", "value": {"step": 3}})
    # A new process would hold a new store: no hint, no cache, only the table.
    async with _servers(create_server(StoreSessionState(_astore(client, table)))) as (url,):
        assert (await _call(url, "recall", {"session_id": sid, "key": "plan"}))["value"] == {
            "step": 3
        }


@_sync(30)
async def test_two_principals_are_isolated(client: Any, table: str) -> None:
    auth = StaticTokenVerifier(tokens=TOKENS)
    server = create_server(StoreSessionState(_astore(client, table)), auth=auth)
    async with _servers(server) as (url,):
        sid = await _call(url, "create_session", {}, auth="token-alice")
        await _call(url, "remember", {"session_id": sid, "key": "k", "value": "a"}, "token-alice")
        with pytest.raises(ToolError, match=INVALID):  # bob cannot tell it exists
            (await _call(url, "recall", {"session_id": sid, "key": "k"}, "token-bob"))["value"]
        with pytest.raises(ToolError, match=INVALID):
            await _call(url, "end_session", {"session_id": sid}, "token-bob")
        assert (await _call(url, "recall", {"session_id": sid, "key": "k"}, "token-alice"))[
            "value"
        ] == "a"
        # The injected per-user bucket: one each, created by its first write.
        await _call(url, "remember_mine", {"key": "k", "value": "alice's"}, "token-alice")
        assert (await _call(url, "recall_mine", {"key": "k"}, "token-bob"))["value"] is None
        await _call(url, "remember_mine", {"key": "k", "value": "bob's"}, "token-bob")
        assert (await _call(url, "recall_mine", {"key": "k"}, "token-alice"))["value"] == "alice's"
        assert (await _call(url, "recall_mine", {"key": "k"}, "token-bob"))["value"] == "bob's"


def _session(state: StoreSessionState, sid: str) -> Session:
    # FastMCP's own Session, over its own adapter, as get_session builds it.
    adapter: PydanticAdapter[Any] = PydanticAdapter(key_value=state, pydantic_model=dict)
    return Session(store=adapter, principal=None, session_id=sid, public_id=sid)


@_sync(30)
async def test_requests_per_operation(client: Any, table: str) -> None:
    state = StoreSessionState(_astore(client, table))
    with RequestLog(client) as log:
        session = _session(state, "s-cost")
        await session._create()
        assert log.counts() == {"PutItem": 1, "UpdateItem": 1}
        for op, expected in (
            (session._exists(), {"Query": 1}),  # get_session's check
            (session.set("a", 1), {"TransactWriteItems": 1}),
            (session.get("a"), {"Query": 1}),
            (session.delete("a"), {"TransactWriteItems": 1}),
        ):
            log.reset()
            await op
            assert log.counts() == expected
        await session.set("b", [1, 2])
        log.reset()
        await session.clear()
        assert log.counts() == {"Query": 1, "TransactWriteItems": 1}  # read, then one change
        assert await session.get("b") is None
        log.reset()
        await session.end()
        assert log.counts() == {"UpdateItem": 1, "TransactWriteItems": 1}
        assert not await session._exists()


@_sync(30)
async def test_keys_values_and_bad_input(client: Any, table: str) -> None:
    state = StoreSessionState(_astore(client, table))
    session = _session(state, "s-keys")
    await session._create()
    odd = ["plain", "with space", "ünïcode", "x" * 500, "status", "ttl", ""]
    for i, key in enumerate(odd):
        await session.set(key, {"i": i, "f": 0.1})
    for i, key in enumerate(odd):
        assert await session.get(key) == {"i": i, "f": 0.1}
    assert attribute_name("plain") == "k.plain" and attribute_name("status") == "k.status"
    assert attribute_name("with space").startswith("h.") and len(attribute_name("x" * 500)) == 62
    with pytest.raises(ss.InvalidInput, match="not JSON-serializable"):
        await session.set("bad", object())
    with pytest.raises(ss.InvalidInput):
        await session.set("nan", float("nan"))
    with pytest.raises(ss.ItemTooLarge):
        await session.set("big", "x" * 5000)
    assert await session.get("missing", "default") == "default"
    for kwargs in ({"ttl_seconds": 0}, {"idle_seconds": 10**9}, {"user_ttl_seconds": True}):
        with pytest.raises(ss.InvalidInput):
            StoreSessionState(_astore(client, table), **kwargs)
    with pytest.raises(ss.InvalidInput):
        StoreSessionState(object())  # type: ignore[arg-type]


@_sync(30)
async def test_stock_server_in_the_same_process_is_untouched(client: Any, table: str) -> None:
    StoreSessionState(_astore(client, table))  # the dispatch is installed
    async with _servers(create_server()) as (url,), Client(url) as c:  # FastMCP's own store
        sid = (await c.call_tool("create_session", {})).data
        await c.call_tool("remember", {"session_id": sid, "key": "a", "value": 1})
        assert (await c.call_tool("recall", {"session_id": sid, "key": "a"})).data["value"] == 1
    with pytest.raises(ss.SessionNotFound):  # nothing of it went to the table
        ss.SessionStore(client, table).get_session(sid, owner="anon")
