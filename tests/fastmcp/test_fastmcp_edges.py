"""FastMCP's session state at its edges (``sessionstore.fastmcp.state``), on the real engine.

A per-user bucket whose first write was interrupted before its activation, or raced another
first write, is usable; a session used once per idle period lives to its cap, one left alone
expires within the idle period and its slack; an ended session leaves no item with a ttl past
a bounded time. Faults are injected through botocore's hooks, time through the store's clock.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from fastmcp.server.sessions import InvalidSession, Session, UserSession
from key_value.aio.adapters.pydantic import PydanticAdapter

import sessionstore as ss
from sessionstore import sizing
from sessionstore.aio import AsyncSessionStore
from sessionstore.fastmcp import StoreSessionState
from sessionstore.fastmcp.names import principal_owner, store_session_id
from sessionstore.testing import RequestLog
from sessionstore.testing.faults import Fault, FaultInjector
from tests.fastmcp.test_fastmcp import _sync
from tests.support.soak import scan_table as scan

PRINCIPAL = '["app","issuer","alice"]'
OWNER = principal_owner(PRINCIPAL)
BUCKET = store_session_id("_user", OWNER)


def _state(client: Any, table: str, clock: ss.Clock | None = None, **kw: Any) -> StoreSessionState:
    return StoreSessionState(AsyncSessionStore(ss.SessionStore(client, table, clock=clock)), **kw)


def _adapter(state: StoreSessionState) -> PydanticAdapter[Any]:
    return PydanticAdapter(key_value=state, pydantic_model=dict)


def _bucket(state: StoreSessionState) -> Session:
    """The injected per-user bucket, as FastMCP builds it for an authenticated principal."""
    return UserSession(store=_adapter(state), principal=PRINCIPAL, session_id="_user")


def _session(state: StoreSessionState, sid: str) -> Session:
    """A ``SessionId`` session, as ``get_session`` builds it (no auth)."""
    return Session(store=_adapter(state), principal=None, session_id=sid, public_id=sid)


# ---------------------------------------------------------------- a bucket's first write


@pytest.mark.parametrize("fault", [Fault.THROTTLE, Fault.SERVER_ERROR])
@_sync(60)
async def test_bucket_whose_activation_failed_is_usable(
    engine: Any, table: str, fault: Fault
) -> None:
    client = ss.connect(engine.endpoint_url, max_attempts=1)  # botocore gives up at once
    state = _state(client, table)
    bucket = _bucket(state)
    reported: ss.Unavailable | None = None
    with FaultInjector(client, rates={fault: 1.0}, operations=["UpdateItem"]) as faults:
        try:
            await bucket.set("a", 1)  # created with the write in it; the activation refused
        except ss.Unavailable as exc:
            reported = exc
    assert faults.injected[fault] >= 1
    raw = ss.SessionStore(ss.connect(engine.endpoint_url), table)
    assert raw.get_session(BUCKET, owner=OWNER).status is ss.Status.INITIALIZING
    # Usable at once, on this instance and on a fresh one.
    for other in (bucket, _bucket(_state(ss.connect(engine.endpoint_url), table))):
        assert await other.get("a") == 1
    await bucket.set("b", 2)
    await bucket.clear()
    assert (await bucket.get("a"), await bucket.get("b")) == (None, None)
    await bucket.set("c", 3)
    await bucket.end()  # a bucket's end empties it and it stays usable
    assert await bucket.get("c") is None
    assert raw.get_session(BUCKET, owner=OWNER).status is ss.Status.ACTIVE
    assert reported is None, f"the first write landed, yet was reported failed: {reported}"


@_sync(60)
async def test_bucket_left_by_a_crash_before_its_activation_is_usable(
    client: Any, table: str
) -> None:
    # What a process that died between the two requests of a first write leaves behind.
    raw = ss.SessionStore(client, table)
    raw.create_session(BUCKET, owner=OWNER, ttl_seconds=3600, attributes={"k.a": 1})
    bucket = _bucket(_state(client, table))
    assert await bucket.get("a") == 1
    await bucket.end()
    assert await bucket.get("a") is None


@_sync(60)
async def test_racing_first_writes_never_raise_invalid_session(engine: Any, table: str) -> None:
    """A's first write creates the bucket and is held before its activation; B writes to the
    bucket A created, then reads it: B must not see ``InvalidSession``."""
    a_client, b_client = ss.connect(engine.endpoint_url), ss.connect(engine.endpoint_url)
    a, b = _bucket(_state(a_client, table)), _bucket(_state(b_client, table))
    held, release = threading.Event(), threading.Event()

    def hold_activation(**_kwargs: Any) -> None:
        held.set()
        release.wait(20)

    a_client.meta.events.register("before-send.dynamodb.UpdateItem", hold_activation)
    try:
        first = asyncio.create_task(a.set("from_a", 1))
        assert await asyncio.to_thread(held.wait, 20)
        await b.set("from_b", 2)
        assert await b.get("from_a") == 1
        assert await b.get("from_b") == 2
    finally:
        release.set()
        a_client.meta.events.unregister("before-send.dynamodb.UpdateItem", hold_activation)
    await first
    assert (await a.get("from_a"), await a.get("from_b")) == (1, 2)

    # And freely: eight first writes at once, on two instances, each reading its key back.
    principals = [f'["app","issuer","p{i}"]' for i in range(4)]
    states = [_state(a_client, table), _state(b_client, table)]

    async def first_write(i: int) -> Any:
        mine = UserSession(
            store=_adapter(states[i % 2]), principal=principals[i // 2], session_id="_user"
        )
        await mine.set(f"k{i}", i)
        return await mine.get(f"k{i}")

    assert await asyncio.gather(*(first_write(i) for i in range(8))) == list(range(8))


# ---------------------------------------------------------------- idle expiry


@_sync(60)
async def test_short_idle_session_only_read_stays_alive(client: Any, table: str) -> None:
    clock = ss.ManualClock("2026-01-01T12:00:00.900Z")  # late in its second: rounding bites
    state = _state(client, table, clock, ttl_seconds=600, idle_seconds=2)
    session = _session(state, "s-short-idle")
    await session._create()
    await session.set("a", 1)
    with RequestLog(client) as log:
        for i in range(1, 41):  # read every 0.3 s for 12 s
            clock.advance(seconds=0.3)
            assert await session._exists(), f"refused {0.3 * i:.1f} s after the write"
            assert await session.get("a") == 1
    # One touch per second at most: the deadline moves by whole seconds.
    assert 0 < log.counts()["UpdateItem"] <= 13
    clock.advance(seconds=1.999)  # one use within the idle period
    assert await session._exists()
    clock.advance(seconds=2 + 1)  # then left alone past idle and slack (half, rounded up)
    assert not await session._exists()


@_sync(60)
async def test_session_used_once_per_idle_period_lives_to_its_cap(client: Any, table: str) -> None:
    clock = ss.ManualClock("2026-01-01T12:00:00Z")
    state = _state(client, table, clock, ttl_seconds=1200, idle_seconds=60)
    session = _session(state, "s-irregular")
    await session._create()
    await session.set("a", 1)
    used = 0.0
    for gap in [10, 59.9] * 9:  # irregular, each gap under the idle period
        clock.advance(seconds=gap)
        used += gap
        assert await session._exists(), f"refused {used:.1f} s after the write"
        assert await session.get("a") == 1
    assert used < 1200
    clock.advance(seconds=59.9)
    assert await session._exists()
    clock.advance(seconds=60 + 30)  # left alone: gone after idle and slack (half)
    assert not await session._exists()
    # Written only: the same bound.
    session = _session(state, "s-written")
    await session._create()
    await session.set("a", 1)
    clock.advance(seconds=59.999)
    await session.set("a", 2)
    clock.advance(seconds=59.999)
    assert await session.get("a") == 2
    clock.advance(seconds=60 + 30)
    assert not await session._exists()


# ---------------------------------------------------------------- what an end leaves behind


@_sync(60)
async def test_ended_session_keeps_no_item_past_a_bounded_ttl(client: Any, table: str) -> None:
    clock = ss.ManualClock("2026-01-01T12:00:00Z")
    state = _state(client, table, clock)  # a day's cap
    session = _session(state, "s-ended")
    await session._create()
    await session.set("plan", {"steps": ["a", "b"]})
    await session.set("note", "x" * 300)
    before = {item["sk"]["S"]: item for item in scan(client, table)}
    ended_s = clock.now_ms() // 1000
    assert await session._exists()  # end_session resolves the id first (get_session)
    with RequestLog(client) as log:
        await session.end()
    left = [item for item in scan(client, table) if item["pk"]["S"] == "session#s-ended"]
    assert left, "the closed metadata item stays, so a racing write finds it closed"
    late = {item["sk"]["S"]: int(item["ttl"]["N"]) - ended_s for item in left}
    assert all(s <= 60 for s in late.values()), f"seconds of ttl left after the end: {late}"
    assert set(late) == {"metadata", "metadata#attributes"}
    # What it costs: an UpdateItem (closing), then one transaction (closed, and the ttl on both
    # items): 5 write units while the state is under 1 KB.
    assert log.counts() == {"UpdateItem": 1, "TransactWriteItems": 1}
    meta = sizing.item_size(before["metadata"])
    attrs = sizing.item_size(before["metadata#attributes"])
    assert attrs < 1024
    units = sizing.write_units(meta) + sizing.write_units(meta, transactional=True)
    assert units + sizing.write_units(attrs, transactional=True) == 5
    # Ended: the id never resolves again, and nothing is written under it.
    assert not await session._exists()
    for op in (session.get("plan"), session.set("plan", 1), session.clear()):
        with pytest.raises(InvalidSession):
            await op
    clock.advance(seconds=61)  # past its ttl: gone for every reader
    with pytest.raises(ss.SessionExpired):
        ss.SessionStore(client, table, clock=clock).get_session("s-ended", owner="anon")


@_sync(60)
async def test_end_whose_response_is_lost_ends_once(engine: Any, table: str) -> None:
    client = ss.connect(engine.endpoint_url, max_attempts=1)
    state = _state(client, table)
    session = _session(state, "s-lost-end")
    await session._create()
    await session.set("a", 1)
    script = [Fault.LOST_RESPONSE]  # the closing transaction lands, its answer is lost
    with FaultInjector(client, script=script, operations=["TransactWriteItems"]) as faults:
        await session.end()
    assert faults.injected[Fault.LOST_RESPONSE] == 1
    left = [item for item in scan(client, table) if item["pk"]["S"] == "session#s-lost-end"]
    assert [item["sk"]["S"] for item in left] == ["metadata", "metadata#attributes"]
    assert left[0]["status"]["S"] == "closed"
    assert left[0]["ttl"] == left[1]["ttl"]
    await session.end()  # ended already: a no-op
    # A session that never had state: its end leaves an empty state item, expiring with it.
    empty = _session(state, "s-empty-end")
    await empty._create()
    await empty.end()
    left = [item for item in scan(client, table) if item["pk"]["S"] == "session#s-empty-end"]
    assert len({item["ttl"]["N"] for item in left}) == 1
    raw = ss.SessionStore(client, table)
    assert raw.get_session("s-empty-end", owner="anon").attributes == {}


def test_close_and_expire_moves_only_a_closing_session(store: ss.SessionStore) -> None:
    """The store operation behind ``end``: from ``closing`` only; a closed session is left."""
    sid = store.create_session(owner="o", attributes={"a": 1}).session_id
    store.activate(sid, owner="o")
    at = store.clock.now_ms() // 1000 + 30
    with pytest.raises(ss.InvalidTransition):
        store.close_and_expire(sid, owner="o", expire_at=at)
    with pytest.raises(ss.InvalidInput):
        store.close_and_expire(sid, owner="o", expire_at=-1)
    store.begin_close(sid, owner="o")
    store.close_and_expire(sid, owner="o", expire_at=at)
    closed = store.get_session(sid, owner="o")
    assert (closed.status, closed.ttl, closed.attributes) == (ss.Status.CLOSED, at, {"a": 1})
    store.close_and_expire(sid, owner="o", expire_at=at + 100)  # closed already: left as it is
    assert store.get_session(sid, owner="o").ttl == at
    with pytest.raises(ss.SessionNotFound):
        store.close_and_expire(sid, owner="mallory", expire_at=at)
