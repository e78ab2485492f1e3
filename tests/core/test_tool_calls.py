"""record_tool_call / tool_calls / load: exactly once, in time order, paginated."""

from __future__ import annotations

from typing import Any

import pytest

import sessionstore as ss
from sessionstore import claims, sizing
from sessionstore.testing import Fault, FaultInjector, RequestLog
from sessionstore.tutorial import source_design
from tests.conftest import scan


def record(store: ss.SessionStore, sid: str, call: str = "call-1", **kw: Any) -> ss.ToolCallRecord:
    args: dict[str, Any] = {
        "tool_name": "search",
        "input": {"q": "x"},
        "output": [1, 2.5],
        "duration_ms": 12,
        "owner": "alice",
    }
    args.update(kw)
    return store.record_tool_call(sid, call, **args)


def test_record_is_one_transaction(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog, client: Any, table: str
) -> None:
    rec = record(store, active.session_id)
    assert requests.counts() == {"TransactWriteItems": 1}
    assert rec.tool_call_id == "call-1" and rec.output == [1, 2.5]
    assert rec.recorded_at == "2026-01-01T12:00:00.000Z"
    sks = sorted(i["sk"]["S"] for i in scan(client, table))
    assert sks == ["metadata", "tool#call-1"]  # one item per call, keyed by its id


def test_record_write_units(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    record(store, active.session_id)
    items = {i["sk"]["S"].split("#")[0]: i for i in scan(client, table)}
    units = {
        k: sizing.write_units(sizing.item_size(v), transactional=True) for k, v in items.items()
    }
    print(f"transactional write units per item: {units}")
    assert units == {"metadata": 2, "tool": 2}  # 4 WCU for a small record


def test_retry_from_a_new_instance_minutes_later_writes_nothing(
    store: ss.SessionStore,
    active: ss.Session,
    client: Any,
    table: str,
    clock: ss.ManualClock,
    requests: RequestLog,
) -> None:
    original = record(store, active.session_id, duration_ms=12)
    before = scan(client, table)
    clock.advance(seconds=300)
    fresh = ss.SessionStore(client, table, clock=clock)
    requests.reset()
    again = record(fresh, active.session_id, duration_ms=99)  # another measured duration
    assert again == original
    # A cold instance reads the session once (to give the record the session's ttl), then the
    # transaction is refused on the call item, whose ALL_OLD is the original record: no read.
    assert requests.counts() == {"GetItem": 1, "TransactWriteItems": 1}
    assert scan(client, table) == before


def test_different_request_under_the_same_id_conflicts(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    original = record(store, active.session_id)
    before = scan(client, table)
    for change in (
        {"input": {"q": "y"}},
        {"tool_name": "fetch"},
        {"input": {"q": "x", "n": 1}},
        {"input": {"q": "x", "n": 1.0}},
    ):  # 1 and 1.0 are different JSON texts
        with pytest.raises(ss.ToolCallConflict) as err:
            record(store, active.session_id, **change)
        assert err.value.stored == original
    assert scan(client, table) == before


def test_fingerprint_is_the_request_not_the_output(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    """Issue 9 defect 7: a re-run tool may answer differently (a timestamp, a ranking); the
    idempotency key names the request (name + input), and the stored output is the answer."""
    original = record(store, active.session_id, output={"at": "12:00:00", "hits": [3, 1]})
    before = scan(client, table)
    for output in ({"at": "12:00:07", "hits": [1, 3]}, [1.0, 2.5], None):
        again = record(store, active.session_id, output=output, duration_ms=99)
        assert again == original
        assert again.output == {"at": "12:00:00", "hits": [3, 1]}
    assert scan(client, table) == before


def test_key_order_does_not_make_a_conflict(store: ss.SessionStore, active: ss.Session) -> None:
    a = record(store, active.session_id, input={"a": 1, "b": 2})
    assert record(store, active.session_id, input={"b": 2, "a": 1}) == a


@pytest.mark.parametrize("status", ["initializing", "closing", "closed"])
def test_refused_unless_active(
    store: ss.SessionStore, client: Any, table: str, status: str
) -> None:
    sid = store.create_session(owner="alice").session_id
    path = {
        "initializing": [],
        "closing": [store.activate, store.begin_close],
        "closed": [store.activate, store.begin_close, store.close],
    }[status]
    for step in path:
        step(sid, owner="alice")
    before = scan(client, table)
    with pytest.raises(ss.SessionNotActive):
        record(store, sid)
    assert scan(client, table) == before


def test_refused_on_missing_foreign_or_expired(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock, client: Any, table: str
) -> None:
    before = scan(client, table)
    with pytest.raises(ss.SessionNotFound):
        record(store, "missing")
    with pytest.raises(ss.SessionNotFound):
        record(store, active.session_id, owner="bob")
    clock.advance(seconds=86400)
    with pytest.raises(ss.SessionExpired):
        record(store, active.session_id)
    assert scan(client, table) == before


def test_retry_of_a_recorded_call_after_close_returns_the_original(
    store: ss.SessionStore, active: ss.Session
) -> None:
    original = record(store, active.session_id)
    store.begin_close(active.session_id, owner="alice")
    assert record(store, active.session_id) == original


def test_lost_response_records_once(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    with FaultInjector(client, script=[Fault.LOST_RESPONSE]) as faults:
        rec = record(store, active.session_id)
    assert faults.injected[Fault.LOST_RESPONSE] == 1
    assert [r.tool_call_id for r in store.tool_calls(active.session_id, owner="alice")] == [
        rec.tool_call_id
    ]


def test_source_design_writes_two_records_for_one_retried_call(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str, clock: ss.ManualClock
) -> None:
    """Defect 1: a fresh timestamp in the sort key; attribute_not_exists never fires."""

    def now_iso() -> str:
        return ss.format_timestamp(clock.now_ms())

    for _ in range(2):  # the caller retries after a timeout
        source_design.record_tool_call(
            client, active.session_id, "call-1", "search", {}, {}, 5, table=table, now_iso=now_iso
        )
        clock.advance(ms=250)
    source_records = [i for i in scan(client, table) if i["sk"]["S"].startswith("tool#")]
    assert len(source_records) == 2
    # Defect 10: it also lands on a closed session.
    store.begin_close(active.session_id, owner="alice")
    source_design.record_tool_call(
        client, active.session_id, "call-2", "search", {}, {}, 5, table=table, now_iso=now_iso
    )
    assert len([i for i in scan(client, table) if i["sk"]["S"].startswith("tool#")]) == 3


def test_history_is_in_order_of_first_recording(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock
) -> None:
    ids = ["zeta", "alpha", "mid", "beta"]
    for call in ids:
        record(store, active.session_id, call)
        clock.advance(ms=1)
    record(store, active.session_id, "alpha")  # a retry keeps its first position
    session, context, history = store.load(active.session_id, owner="alice")
    assert [r.tool_call_id for r in history] == ids
    assert session.session_id == active.session_id and list(context) == []
    assert [r.tool_call_id for r in store.tool_calls(active.session_id, owner="alice")] == ids


def test_history_follows_last_evaluated_key_past_1_mb(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock, requests: RequestLog
) -> None:
    big = "p" * 100_000
    for n in range(4):  # context pages of ~100 KB sort between the metadata and the records
        store.append_context(active.session_id, [{"n": n, "text": big}], owner="alice")
    for n in range(12):  # 16 x ~100 KB > 1 MB: at least two Query pages
        record(store, active.session_id, f"call-{n:02d}", output=big)
        clock.advance(ms=1)
    requests.reset()
    _session, context, history = store.load(active.session_id, owner="alice")
    counts = requests.counts()
    print(f"Query pages for 4 x 100 KB messages and 12 x 100 KB records: {counts['Query']}")
    assert counts["Query"] >= 2 and set(counts) == {"Query"}  # one paginated Query
    assert [m["n"] for m in context] == [0, 1, 2, 3]
    assert all(m["text"] == big for m in context)
    assert [r.tool_call_id for r in history] == [f"call-{n:02d}" for n in range(12)]
    assert all(r.output == big for r in history)
    requests.reset()
    lows: list[str] = []

    def low_bound(params: dict[str, Any], **_: Any) -> None:
        low = params["KeyConditionExpression"].split(" BETWEEN ")[1].split(" AND ")[0]
        lows.append(params["ExpressionAttributeValues"][low]["S"])

    store.client.meta.events.register("provide-client-params.dynamodb.Query", low_bound)
    try:
        assert len(list(store.tool_calls(active.session_id, owner="alice"))) == 12
    finally:
        store.client.meta.events.unregister("provide-client-params.dynamodb.Query", low_bound)
    # GetItem of the metadata item, then Query pages of the tool# range only (1.2 MB of
    # records: two), never the context pages
    assert requests.counts() == {"GetItem": 1, "Query": 2}
    assert lows == ["tool#", "tool#"]


def test_load_refuses_missing_expired_and_foreign(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock
) -> None:
    with pytest.raises(ss.SessionNotFound):
        store.load("missing")
    with pytest.raises(ss.SessionNotFound):
        list(store.tool_calls(active.session_id, owner="bob"))
    clock.advance(seconds=86400)
    with pytest.raises(ss.SessionExpired):
        store.load(active.session_id, owner="alice")


@pytest.mark.parametrize(
    "bad",
    [
        {"tool_call_id": ""},
        {"tool_call_id": "a b"},
        {"tool_call_id": "x" * 129},
        {"tool_name": ""},
        {"tool_name": 3},
        {"input": float("nan")},
        {"output": {1, 2}},
        {"output": b"raw"},
        {"duration_ms": -1},
        {"duration_ms": 1.5},
        {"ttl_seconds": 0},
    ],
)
def test_bad_arguments_write_nothing(
    store: ss.SessionStore,
    active: ss.Session,
    client: Any,
    table: str,
    requests: RequestLog,
    bad: dict[str, Any],
) -> None:
    args: dict[str, Any] = {
        "tool_call_id": "ok",
        "tool_name": "search",
        "input": {},
        "output": {},
        "duration_ms": 1,
    }
    args.update(bad)
    before = scan(client, table)
    requests.reset()
    with pytest.raises(ss.InvalidInput):
        store.record_tool_call(active.session_id, args.pop("tool_call_id"), **args, owner="alice")
    assert requests.count == 0
    assert scan(client, table) == before


def test_oversized_record_is_refused_before_sending(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    requests.reset()
    with pytest.raises(ss.ItemTooLarge):
        record(store, active.session_id, output="x" * sizing.MAX_ITEM_BYTES)
    assert requests.count == 0


def test_an_item_this_store_did_not_write_in_the_tool_range_is_refused_not_a_key_error(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    """An item under ``tool#`` without a state or a fingerprint (written by hand, or by
    another program) is ``DynamoDBError("UnexpectedItem")`` wherever the store meets it: in the
    history, and as the item that holds an id (ids may hold "#")."""
    sid, call = active.session_id, "2026-01-01T12:00:00.000Z#old-1"
    foreign = {
        "pk": {"S": f"session#{sid}"},
        "sk": {"S": f"tool#{call}"},
        "sessionId": {"S": sid},
        "toolCallId": {"S": "old-1"},
        "toolName": {"S": "search"},
        "input": {"S": "{}"},
        "output": {"S": "1"},
        "durationMs": {"N": "3"},
        "recordedAt": {"S": "2026-01-01T12:00:00.000Z"},
        "ttl": {"N": str(active.ttl)},
    }
    client.put_item(TableName=table, Item=foreign)
    before = scan(client, table)
    for attempt in (
        lambda: list(store.tool_calls(sid, owner="alice")),
        lambda: store.load(sid, owner="alice"),
        lambda: record(store, sid, call),
        lambda: claims.claim(
            store.table, sid, call, "search", {}, owner="alice", ttl=active.ttl, lease_ms=1
        ),
    ):
        with pytest.raises(ss.DynamoDBError) as caught:
            attempt()
        assert caught.value.code == "UnexpectedItem"
    assert scan(client, table) == before


def test_one_conflict_for_a_record_and_a_claim_under_an_id_taken_by_another_request(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    """``record_tool_call`` and a claim refuse another request under a taken id with the same
    ``ToolCallConflict`` (the MCP layer maps it to -32066), whichever of them took it."""
    sid = active.session_id
    original = record(store, sid, "c1")
    claimed = claims.claim(
        store.table, sid, "c2", "search", {"q": "x"}, owner="alice", ttl=active.ttl, lease_ms=60_000
    )
    assert claimed.state is claims.State.CLAIMED
    before = scan(client, table)
    with pytest.raises(ss.ToolCallConflict) as on_record:
        claims.claim(
            store.table, sid, "c1", "search", {"q": "y"}, owner="alice", ttl=active.ttl, lease_ms=1
        )
    assert on_record.value.stored == original and on_record.value.tool_call_id == "c1"
    with pytest.raises(ss.ToolCallConflict) as on_claim:
        claims.claim(
            store.table, sid, "c2", "fetch", {"q": "x"}, owner="alice", ttl=active.ttl, lease_ms=1
        )
    assert on_claim.value.stored is None and not on_claim.value.same_request
    with pytest.raises(ss.ToolCallConflict) as same_request:
        record(store, sid, "c2", input={"q": "x"})
    assert same_request.value.stored is None and same_request.value.same_request
    assert "claimed by a call that has not been recorded" in str(same_request.value)
    assert scan(client, table) == before
