"""Every numeric argument of the public API refuses a bad value with ``InvalidInput`` before
anything is sent: too large for DynamoDB (38 digits) or for its meaning, negative, NaN or
infinite, a bool, a string, a float where an int is meant. The app options refuse when the app
is built, in one line."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import sessionstore as ss
from sessionstore.aio import AsyncSessionStore
from sessionstore.testing import RequestLog
from tests.conftest import PREFIX

NAN, INF = float("nan"), float("inf")
#: Bad wherever an int is meant.
BAD_INTS: list[object] = [10**38, 10**20, -1, NAN, INF, -INF, True, "5", 5.0, 2.5, 10**400]
#: Bad wherever seconds (an int or a float) are meant.
BAD_SECONDS: list[object] = [10**38, -1, -0.5, NAN, INF, True, "5", 10**400]

Call = Callable[[Any, object], object]


def _run(coroutine: Any) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(30):
            return await coroutine

    return asyncio.run(bounded())


def _store(kw: str) -> Call:
    return lambda ctx, v: ss.SessionStore(ctx.client, ctx.table, **{kw: v})


def _retry(kw: str) -> Call:
    return lambda ctx, v: ss.RetryPolicy(**{kw: v})


def _state(kw: str) -> Call:
    from sessionstore.fastmcp import StoreSessionState

    return lambda ctx, v: StoreSessionState(ctx.store, **{kw: v})


def _app(ctx: Any, v: object) -> object:
    from sessionstore.mcp import create_app, create_server

    return create_app(create_server(ctx.store, state_keys=["k" * 32]), answer_wait_seconds=v)


def _server(kw: str) -> Call:
    def build(ctx: Any, v: object) -> object:
        from sessionstore.mcp import create_server

        return create_server(ctx.store, state_keys=["k" * 32], **{kw: v})

    return build


INTS: dict[str, Call] = {
    "SessionStore(item_size_limit)": _store("item_size_limit"),
    "SessionStore(max_context_messages)": _store("max_context_messages"),
    "SessionStore(max_context_bytes)": _store("max_context_bytes"),
    "RetryPolicy(max_attempts)": _retry("max_attempts"),
    "create_session(ttl_seconds)": lambda ctx, v: ctx.store.create_session(ttl_seconds=v),
    "create_session(idle_seconds)": lambda ctx, v: ctx.store.create_session(idle_seconds=v),
    "update_attributes(expected_version)": lambda ctx, v: ctx.store.update_attributes(
        ctx.sid, {"a": 1}, expected_version=v
    ),
    "append_context(expected_version)": lambda ctx, v: ctx.store.append_context(
        ctx.sid, ["m"], expected_version=v
    ),
    "record_tool_call(duration_ms)": lambda ctx, v: ctx.store.record_tool_call(
        ctx.sid, "c", "t", {}, None, v
    ),
    "record_tool_call(ttl_seconds)": lambda ctx, v: ctx.store.record_tool_call(
        ctx.sid, "c", "t", {}, None, 1, ttl_seconds=v
    ),
    "context(after)": lambda ctx, v: list(ctx.store.context(ctx.sid, after=v)),
    "AsyncSessionStore(max_workers)": lambda ctx, v: AsyncSessionStore(ctx.store, max_workers=v),
    "aio record_tool_call(duration_ms)": lambda ctx, v: _run(
        AsyncSessionStore(ctx.store).record_tool_call(ctx.sid, "c", "t", {}, None, v)
    ),
    "aio append_context(expected_version)": lambda ctx, v: _run(
        AsyncSessionStore(ctx.store).append_context(ctx.sid, ["m"], expected_version=v)
    ),
    "aio context(after)": lambda ctx, v: _run(
        AsyncSessionStore(ctx.store).context(ctx.sid, after=v)
    ),
    "StoreSessionState(ttl_seconds)": _state("ttl_seconds"),
    "StoreSessionState(idle_seconds)": _state("idle_seconds"),
    "StoreSessionState(user_ttl_seconds)": _state("user_ttl_seconds"),
    "create_server(lease_seconds)": _server("lease_seconds"),
    "create_server(default_ttl_seconds)": _server("default_ttl_seconds"),
    "create_server(idle_seconds)": _server("idle_seconds"),
}
SECONDS: dict[str, Call] = {
    "RetryPolicy(base_delay)": _retry("base_delay"),
    "RetryPolicy(max_delay)": _retry("max_delay"),
    "create_app(answer_wait_seconds)": _app,
}
CASES = [(name, value) for name in INTS for value in BAD_INTS] + [
    (name, value) for name in SECONDS for value in BAD_SECONDS
]


# One table and one session for the whole sweep: no case sends anything (each asserts so), so
# none can disturb the next, and a table per case made the sweep take minutes.
@pytest.fixture(scope="module")
def client(engine: Any) -> Any:
    return ss.connect(engine.endpoint_url)


@pytest.fixture(scope="module")
def table(client: Any) -> str:
    name = f"{PREFIX}numbers"
    ss.SessionStore(client, name).create_table()
    return name


@pytest.fixture(scope="module")
def store(client: Any, table: str) -> ss.SessionStore:
    clock = ss.ManualClock("2026-01-01T12:00:00Z")
    return ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds())


@pytest.fixture(scope="module")
def active(store: ss.SessionStore) -> ss.Session:
    session = store.create_session(owner="alice")
    return store.activate(session.session_id, owner="alice")


class Ctx:
    def __init__(self, client: Any, table: str, store: ss.SessionStore, sid: str) -> None:
        self.client, self.table, self.store, self.sid = client, table, store, sid


@pytest.mark.parametrize(("argument", "value"), CASES, ids=[f"{n}={v!r:.12}" for n, v in CASES])
def test_a_bad_number_is_invalid_input_and_sends_nothing(
    client: Any,
    table: str,
    store: ss.SessionStore,
    active: ss.Session,
    argument: str,
    value: object,
) -> None:
    call = {**INTS, **SECONDS}[argument]
    with RequestLog(client) as log, pytest.raises(ss.InvalidInput) as caught:
        call(Ctx(client, table, store, active.session_id), value)
    assert log.count == 0
    message = str(caught.value)
    assert "\n" not in message and message.split(" ")[0] in argument, message
