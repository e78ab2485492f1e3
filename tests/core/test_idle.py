"""Idle expiry under an absolute cap (``create_session(idle_seconds=)``), on the real embedded
engine and the injected clock.

A session with an idle timeout expires when no accepted write touched it for that long, and
never later than its ``ttl`` (the cap, which DynamoDB's TTL acts on). Every write to the
metadata item moves the deadline on in the request it sends anyway; ``touch`` does it for a
reader in one UpdateItem, and the MCP legacy layer sends it at most once per half idle period.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest

import sessionstore as ss
from sessionstore import claims, schema
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp.sessions import needs_touch
from sessionstore.testing import Fault, FaultInjector, RequestLog
from sessionstore.wire import to_python
from tests.conftest import scan
from tests.support.items import stored

IDLE = 60
CAP = 3600


def _idle_session(store: ss.SessionStore, *, idle: int = IDLE, ttl: int = CAP) -> ss.Session:
    session = store.create_session(owner="alice", ttl_seconds=ttl, idle_seconds=idle)
    return store.activate(session.session_id, owner="alice")


def _now_s(clock: ss.ManualClock) -> int:
    return clock.now_ms() // 1000


def _claim(store: ss.SessionStore, sid: str, call: str, ttl: int) -> claims.Outcome:
    return claims.claim(
        store.table,
        sid,
        call,
        "search",
        {"q": call},
        owner="alice",
        ttl=ttl,
        lease_ms=60_000,
    )


def test_a_session_is_created_with_its_idle_deadline_and_its_cap(
    store: ss.SessionStore, clock: ss.ManualClock
) -> None:
    now = _now_s(clock)
    session = store.create_session(owner="alice", ttl_seconds=CAP, idle_seconds=IDLE)
    assert (session.ttl, session.idle_seconds, session.idle_until) == (now + CAP, IDLE, now + IDLE)
    assert session.expires_at == now + IDLE
    item = to_python(stored(store.client, store.table_name, session.session_id)) or {}
    assert (item["ttl"], item["idle"], item["idleUntil"]) == (now + CAP, IDLE, now + IDLE)
    assert store.get_session(session.session_id, owner="alice") == session


@pytest.mark.parametrize("idle", [0, -1, CAP + 1, True, 1.5, "60"])
def test_an_idle_timeout_outside_one_to_the_ttl_is_refused_unsent(
    store: ss.SessionStore, requests: RequestLog, idle: Any
) -> None:
    with pytest.raises(ss.InvalidInput) as raised:
        store.create_session(ttl_seconds=CAP, idle_seconds=idle)
    assert "idle_seconds" in str(raised.value) and "\n" not in str(raised.value)
    assert requests.count == 0


def test_a_fixed_ttl_session_is_unchanged(store: ss.SessionStore, clock: ss.ManualClock) -> None:
    session = store.create_session(owner="alice", ttl_seconds=600)
    assert session.idle_seconds is None
    assert session.idle_until == session.ttl == session.expires_at
    sid = session.session_id
    store.activate(sid, owner="alice")
    clock.advance(seconds=599)  # no write for almost the whole ttl: still alive
    written = store.append_context(sid, ["late"], owner="alice")
    assert written.idle_seconds is None
    assert written.expires_at == written.ttl == session.ttl  # a write never moves the cap
    assert written.idle_until >= written.ttl
    clock.advance(seconds=1)
    with pytest.raises(ss.SessionExpired) as raised:
        store.get_session(sid, owner="alice")
    assert raised.value.ttl == session.ttl
    # An idle period as long as the ttl can never end the session first: it is a fixed one.
    same = store.create_session(ttl_seconds=600, idle_seconds=600)
    assert same.idle_seconds is None and same.expires_at == same.ttl


def test_every_kind_of_write_keeps_an_idle_session_alive(
    store: ss.SessionStore, clock: ss.ManualClock
) -> None:
    """Appends, attribute updates, tool records, claims and transitions, each 50 s after the
    last: the session outlives its first idle deadline many times over."""
    session = _idle_session(store)
    sid, first_deadline = session.session_id, session.idle_until
    writes = [
        lambda: store.append_context(sid, ["m"], owner="alice"),
        lambda: store.update_attributes(sid, {"n": 1}, owner="alice"),
        lambda: store.record_tool_call(sid, "rec", "search", {}, None, 1, owner="alice"),
        lambda: _claim(store, sid, "claimed", session.ttl),
        lambda: store.update_status(sid, ss.Status.CLOSING, owner="alice"),
        lambda: store.close(sid, owner="alice"),
    ]
    for i, write in enumerate(writes):
        clock.advance(seconds=50)
        write()
        item = to_python(stored(store.client, store.table_name, sid)) or {}
        assert item["idleUntil"] == _now_s(clock) + IDLE, i
    now = _now_s(clock)
    assert now >= first_deadline + 4 * IDLE  # alive five idle periods after it was created
    alive = store.get_session(sid, owner="alice")
    assert alive.status is ss.Status.CLOSED and alive.expires_at > now
    assert alive.version == session.version + 4  # append, attributes, two moves
    loaded = store.load(sid, owner="alice")
    assert list(loaded.context) == ["m"] and [r.tool_call_id for r in loaded.tool_calls] == ["rec"]


def test_an_idle_session_expires_everywhere_though_its_item_is_still_there(
    store: ss.SessionStore, clock: ss.ManualClock
) -> None:
    session = _idle_session(store)
    sid = session.session_id
    store.append_context(sid, ["kept"], owner="alice")
    store.record_tool_call(sid, "t1", "search", {}, None, 1, owner="alice")
    deadline = _now_s(clock) + IDLE
    clock.advance(seconds=IDLE)
    refused = {
        "get_session": lambda: store.get_session(sid, owner="alice"),
        "touch": lambda: store.touch(sid, owner="alice"),
        "append_context": lambda: store.append_context(sid, ["late"], owner="alice"),
        "update_attributes": lambda: store.update_attributes(sid, {"a": 1}, owner="alice"),
        "update_attributes pinned": lambda: store.update_attributes(
            sid, {"a": 1}, owner="alice", expected_version=session.version + 1
        ),
        "record_tool_call": lambda: store.record_tool_call(
            sid, "t2", "search", {}, None, 1, owner="alice"
        ),
        "claim": lambda: _claim(store, sid, "c1", session.ttl),
        "transition": lambda: store.begin_close(sid, owner="alice"),
        "update_status": lambda: store.update_status(sid, ss.Status.CLOSING, owner="alice"),
        "context": lambda: list(store.context(sid, owner="alice")),
        "context after": lambda: list(store.context(sid, owner="alice", after=0)),
        "tool_calls": lambda: list(store.tool_calls(sid, owner="alice")),
        "load": lambda: store.load(sid, owner="alice"),
    }
    for name, call in refused.items():
        with pytest.raises(ss.SessionExpired) as raised:
            call()
        assert raised.value.ttl == deadline, name
    # A cold instance (no hint) is refused the same way.
    cold = ss.SessionStore(store.client, store.table_name, clock=clock)
    with pytest.raises(ss.SessionExpired):
        cold.record_tool_call(sid, "t3", "search", {}, None, 1, owner="alice")
    with pytest.raises(ss.SessionExpired):
        cold.update_status(sid, ss.Status.CLOSING, owner="alice")
    # Nothing was written, and DynamoDB has not deleted anything: the cap is an hour away.
    item = to_python(stored(store.client, store.table_name, sid)) or {}
    assert item["idleUntil"] == deadline and item["ttl"] == session.ttl > _now_s(clock)
    assert item["messageCount"] == 1 and item["status"] == "active"
    items = [to_python(i) or {} for i in scan(store.client, store.table_name)]
    assert sorted(i["sk"].split("#")[0] for i in items) == ["metadata", "msg", "tool"]
    # Another owner still sees no session at all.
    with pytest.raises(ss.SessionNotFound):
        store.get_session(sid, owner="mallory")


def test_never_past_the_cap_even_while_used(store: ss.SessionStore, clock: ss.ManualClock) -> None:
    session = _idle_session(store, idle=60, ttl=200)
    sid, cap = session.session_id, session.ttl
    while _now_s(clock) + 30 < cap:
        clock.advance(seconds=30)
        written = store.append_context(sid, ["m"], owner="alice")
        assert written.expires_at == min(cap, _now_s(clock) + 60) <= cap
        touched = store.touch(sid, owner="alice")
        assert touched.expires_at <= cap
    assert written.idle_until > cap  # the deadline the item holds may pass the cap ...
    clock.advance(seconds=cap - _now_s(clock))
    with pytest.raises(ss.SessionExpired) as raised:  # ... the cap wins
        store.append_context(sid, ["too late"], owner="alice")
    assert raised.value.ttl == cap
    with pytest.raises(ss.SessionExpired):
        store.touch(sid, owner="alice")


def test_everything_of_a_session_carries_its_cap(
    store: ss.SessionStore, clock: ss.ManualClock
) -> None:
    """Pages, records and claims expire at the cap: never before the session, however
    often it is extended, and never after it."""
    session = _idle_session(store)
    sid = session.session_id
    for i in range(3):
        clock.advance(seconds=45)
        store.append_context(sid, [i], owner="alice")
        store.record_tool_call(sid, f"t{i}", "search", {}, None, 1, owner="alice")
        _claim(store, sid, f"c{i}", session.ttl)
    items = [to_python(i) or {} for i in scan(store.client, store.table_name)]
    kinds = {i["sk"].split("#")[0] for i in items}
    assert kinds == {"metadata", "msg", "tool"}
    assert len([i for i in items if i["sk"].startswith("tool#")]) == 6  # 3 records, 3 claims
    assert {i["ttl"] for i in items} == {session.ttl}
    meta = next(i for i in items if i["sk"] == schema.META_SK)
    assert meta["idleUntil"] == _now_s(clock) + IDLE < session.ttl


def test_touch_moves_only_the_deadline(
    store: ss.SessionStore, clock: ss.ManualClock, requests: RequestLog
) -> None:
    session = _idle_session(store)
    clock.advance(seconds=40)
    requests.reset()
    touched = store.touch(session.session_id, owner="alice")
    assert requests.operations == ["UpdateItem"]
    assert touched.idle_until == _now_s(clock) + IDLE
    assert touched.version == session.version and touched.write_tokens == session.write_tokens
    assert touched.updated_at == session.updated_at
    with pytest.raises(ss.SessionNotFound):
        store.touch(session.session_id, owner="mallory")
    with pytest.raises(ss.SessionNotFound):
        store.touch("no-such-session", owner="alice")


def test_a_lost_response_on_an_extending_write_neither_loses_nor_doubles(
    store: ss.SessionStore, clock: ss.ManualClock, client: Any
) -> None:
    session = _idle_session(store)
    sid = session.session_id
    steps = [
        ("UpdateItem", lambda: store.append_context(sid, ["once"], owner="alice")),
        ("TransactWriteItems", lambda: store.update_attributes(sid, {"k": 1}, owner="alice")),
        (
            "TransactWriteItems",
            lambda: store.record_tool_call(sid, "t1", "search", {}, None, 1, owner="alice"),
        ),
        ("TransactWriteItems", lambda: _claim(store, sid, "c1", session.ttl)),
        ("UpdateItem", lambda: store.touch(sid, owner="alice")),
        ("UpdateItem", lambda: store.begin_close(sid, owner="alice")),
    ]
    for operation, step in steps:
        clock.advance(seconds=50)  # past the first deadline: only the writes keep it alive
        with FaultInjector(client, script=[Fault.LOST_RESPONSE], operations=[operation]) as f:
            result = step()
        assert f.injected[Fault.LOST_RESPONSE] == 1
        if isinstance(result, claims.Outcome):
            assert result.state is claims.State.CLAIMED  # our own claim, found by its token
        item = to_python(stored(client, store.table_name, sid)) or {}
        assert item["idleUntil"] == _now_s(clock) + IDLE, operation
    loaded = store.load(sid, owner="alice")
    assert list(loaded.context) == ["once"]
    assert [r.tool_call_id for r in loaded.tool_calls] == ["t1"]
    assert loaded.session.attributes == {"k": 1}
    assert loaded.session.version == session.version + 3  # append, attributes, begin_close
    assert loaded.session.message_count == 1
    items = [to_python(i) or {} for i in scan(client, store.table_name)]
    assert sorted(i["sk"] for i in items if i["sk"].startswith("tool#")) == [
        "tool#c1",
        "tool#t1",
    ]


def _calls(store: ss.SessionStore, clock: ss.ManualClock, sid: str) -> None:
    store.activate(sid, owner="alice")
    store.append_context(sid, ["a", "b"], owner="alice")
    store.update_attributes(sid, {"n": 1}, owner="alice")
    store.record_tool_call(sid, "t1", "search", {}, None, 1, owner="alice")
    store.record_tool_call(sid, "t1", "search", {}, None, 1, owner="alice")  # a replay
    _claim(store, sid, "c1", store.get_session(sid, owner="alice").ttl)
    list(store.context(sid, owner="alice"))
    list(store.tool_calls(sid, owner="alice"))
    store.load(sid, owner="alice")
    store.update_status(sid, ss.Status.CLOSING, owner="alice")
    store.close(sid, owner="alice")


def test_requests_per_call_are_the_same_with_and_without_idle_expiry(
    store: ss.SessionStore, clock: ss.ManualClock, requests: RequestLog
) -> None:
    logs = []
    for idle in (None, IDLE):
        requests.reset()
        sid = store.create_session(owner="alice", ttl_seconds=CAP, idle_seconds=idle).session_id
        _calls(store, clock, sid)
        logs.append(list(requests.operations))
    assert logs[0] == logs[1]
    assert "ConditionCheck" not in json.dumps(logs)


def test_needs_touch_at_most_once_per_half_idle_period(
    store: ss.SessionStore, clock: ss.ManualClock
) -> None:
    session = _idle_session(store, idle=100, ttl=1000)
    now = _now_s(clock)
    assert not needs_touch(session, now)
    assert not needs_touch(session, now + 50)  # exactly half left
    assert needs_touch(session, now + 51)
    fixed = store.create_session(ttl_seconds=1000)
    assert not needs_touch(fixed, now + 999)
    near_cap = _idle_session(store, idle=100, ttl=120)
    assert needs_touch(near_cap, now + 90)  # 10 s left; a touch gives the last 20 s
    clock.advance(seconds=30)
    near_cap = store.touch(near_cap.session_id, owner="alice")
    assert near_cap.idle_until > near_cap.ttl  # the cap decides now: a touch would gain nothing
    assert not needs_touch(near_cap, now + 110)


# ------------------------------------------------------------------ the MCP legacy layer

LEGACY = "2025-11-25"


def _post(url: str, session_id: str, method: str = "tools/list") -> httpx2.Response:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": LEGACY,
        "mcp-session-id": session_id,
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": method}
    with httpx2.Client(timeout=10) as http:
        return http.post(url, headers=headers, content=json.dumps(body))


def test_the_legacy_layer_touches_at_most_once_per_half_idle_period(
    engine: LocalDynamoDB, table: str
) -> None:
    """A client that only reads (``tools/list``) keeps its ``Mcp-Session-Id`` alive past the
    SDK's 30 idle minutes, at one UpdateItem per 15 minutes at most; one that stops is 404."""
    from tests.mcp.test_mcp_unmodified_clients import Instances, _run

    instances = Instances(engine, table)

    async def main() -> tuple[list[dict[str, int]], int, int]:
        async with instances.running() as a:
            store = instances.stores[0]
            sid = (await store_open(instances)).session_id
            costs = []
            for advance in (0, 600, 300, 10, 600, 400, 10, 899, 10):
                instances.clock.advance(seconds=advance)
                with RequestLog(store.client) as log:
                    response = await asyncio.to_thread(_post, a.url, sid)
                assert response.status_code == 200, response.text
                costs.append(dict(log.counts()))
            alive = store.get_session(sid).expires_at - _now_s(instances.clock)
            instances.clock.advance(seconds=1800)  # nothing for the whole idle period
            gone = await asyncio.to_thread(_post, a.url, sid)
            return costs, alive, gone.status_code

    async def store_open(instances: Any) -> ss.Session:
        opened = instances.stores[0].create_session(ttl_seconds=3 * 3600, idle_seconds=1800)
        return instances.stores[0].activate(opened.session_id)

    costs, alive, gone = _run(main)
    read, touched = {"GetItem": 1}, {"GetItem": 1, "UpdateItem": 1}
    # At 0, 600 and 900 s at least half of 1800 is left; at 910 less: touched (to 2710); at
    # 1510 read; at 1910 touched (to 3710); at 1920 read; at 2819 touched; at 2829 read.
    assert costs == [read, read, read, touched, read, touched, read, touched, read]
    assert alive == 1800 - 10
    assert gone == 404


def test_the_mcp_server_opens_sessions_with_the_sdks_idle_timeout(
    engine: LocalDynamoDB, table: str
) -> None:
    from mcp import Client

    from tests.mcp.test_mcp_unmodified_clients import Instances, SeenIds, _run

    instances = Instances(engine, table)
    seen = SeenIds()

    async def main() -> tuple[ss.Session, ss.Session]:
        async with instances.running() as a:
            async with Client(a.url) as modern:
                opened = await modern.call_tool("open_session", {})
            async with seen.client(a.url, "legacy") as legacy:
                await legacy.list_tools()
            store = instances.stores[0]
            handle = store.get_session(opened.structured_content["session_id"])
            assert seen.given is not None
            return handle, store.get_session(seen.given)

    for session in _run(main):
        assert session.idle_seconds == 1800
        assert session.ttl - session.idle_until == 3600 - 1800  # the cap: the default ttl
