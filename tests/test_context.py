"""append_context: one request, versioned, never a ghost, exactly once under lost responses."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

import sessionstore as ss
from sessionstore import sizing
from sessionstore.metadata_writes import ATTRIBUTES_MAX_BYTES, TOKEN_CAP, TOKEN_HORIZON_S
from sessionstore.store import METADATA_OVERHEAD
from sessionstore.testing import Fault, FaultInjector, RequestLog, source_design

from .conftest import scan


def test_append_is_one_request_and_bumps_the_version(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    s1 = store.append_context(active.session_id, [{"role": "user", "content": "hi"}], owner="alice")
    s2 = store.append_context(active.session_id, ["a", "b"], owner="alice")
    assert requests.counts() == {"UpdateItem": 2}
    assert (s1.version, s2.version) == (active.version + 1, active.version + 2)
    assert s2.context == ({"role": "user", "content": "hi"}, "a", "b")
    assert s2.context_bytes == sizing.value_size(
        {"L": [{"S": '{"role":"user","content":"hi"}'}, {"S": '"a"'}, {"S": '"b"'}]}
    )


def test_expected_version_conflict_carries_the_current_session(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    store.append_context(active.session_id, ["first"], owner="alice")
    requests.reset()
    with pytest.raises(ss.VersionConflict) as err:
        store.append_context(
            active.session_id, ["stale"], owner="alice", expected_version=active.version
        )
    assert requests.count == 1
    assert err.value.current.version == active.version + 1
    assert err.value.current.context == ("first",)


def test_without_expected_version_appends_commute_one_request_each(
    client: Any,
    table: str,
    clock: ss.ManualClock,
    store: ss.SessionStore,
    active: ss.Session,
    requests: RequestLog,
) -> None:
    """Issue 12: another writer's version bump is no conflict for an append that did not ask
    for a version -- and a cold instance needs no read first."""
    other = ss.SessionStore(client, table, clock=clock)
    theirs = other.append_context(active.session_id, ["theirs"], owner="alice")
    assert requests.counts() == {"UpdateItem": 1}
    requests.reset()
    mine = store.append_context(active.session_id, ["mine"], owner="alice")  # stale hint
    assert requests.counts() == {"UpdateItem": 1}
    assert mine.context == ("theirs", "mine")
    assert (theirs.version, mine.version) == (active.version + 1, active.version + 2)


def test_append_tokens_stay_bounded_and_are_cleaned(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore, active: ss.Session
) -> None:
    """Each append names its token in ``tk``; the instance's next write removes its finished
    ones, and tokens past the horizon are anyone's to remove."""
    sid = active.session_id
    for n in range(5):
        store.append_context(sid, [n], owner="alice")
    assert set(_raw_meta(client, table, sid)["tk"]["M"]) == {"t-0007"}  # only the last one
    writers = [
        ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds(f"w{i}")) for i in range(3)
    ]
    for w in writers:
        w.append_context(sid, ["x"], owner="alice")  # three instances that never come back
    assert len(_raw_meta(client, table, sid)["tk"]["M"]) == 4
    clock.advance(seconds=TOKEN_HORIZON_S + 1)
    store.append_context(sid, ["late"], owner="alice")
    store.append_context(sid, ["later"], owner="alice")  # saw them old in the last ALL_NEW
    assert len(_raw_meta(client, table, sid)["tk"]["M"]) == 1


def test_a_full_token_map_falls_back_to_a_pinned_write(
    client: Any, table: str, clock: ss.ManualClock, active: ss.Session, requests: RequestLog
) -> None:
    """TOKEN_CAP live tokens of instances that never came back: the append is pinned to the
    version (its token in the ring) instead of refused; nothing is lost or doubled."""
    sid = active.session_id
    for i in range(TOKEN_CAP):
        ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds(f"w{i}")).append_context(
            sid, [i], owner="alice"
        )
    assert len(_raw_meta(client, table, sid)["tk"]["M"]) == TOKEN_CAP
    late = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds("late"))
    requests.reset()
    result = late.append_context(sid, ["late"], owner="alice")
    assert requests.counts() == {"UpdateItem": 2}  # refused by the cap, then pinned
    assert list(result.context) == [*range(TOKEN_CAP), "late"]
    assert result.version == active.version + TOKEN_CAP + 1
    assert len(_raw_meta(client, table, sid)["tk"]["M"]) == TOKEN_CAP


def test_an_item_from_before_the_token_map_still_takes_appends(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore, active: ss.Session
) -> None:
    sid = active.session_id
    client.update_item(
        TableName=table,
        Key={"pk": {"S": f"session#{sid}"}, "sk": {"S": "metadata"}},
        UpdateExpression="REMOVE tk, attrs, attrBytes",
    )
    cold = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds("c"))
    first = cold.append_context(sid, ["a"], owner="alice")  # refused, then pinned: map created
    second = cold.append_context(sid, ["b"], owner="alice")  # commutes again
    assert (first.version, second.version) == (active.version + 1, active.version + 2)
    assert list(second.context) == ["a", "b"]
    assert set(_raw_meta(client, table, sid)["tk"]["M"]) == {"ct-0002"}
    updated = cold.update_attributes(sid, {"title": "old item"}, owner="alice")
    assert dict(updated.attributes) == {"title": "old item"}
    assert updated.version == active.version + 3


@pytest.mark.parametrize("status", ["initializing", "closing", "closed"])
def test_append_needs_an_active_session(
    store: ss.SessionStore, client: Any, table: str, status: str
) -> None:
    sid = store.create_session().session_id
    path = {
        "initializing": [],
        "closing": [store.activate, store.begin_close],
        "closed": [store.activate, store.begin_close, store.close],
    }[status]
    for step in path:
        step(sid)
    before = scan(client, table)
    with pytest.raises(ss.SessionNotActive) as err:
        store.append_context(sid, ["x"])
    assert err.value.current.value == status
    assert scan(client, table) == before


def test_append_on_missing_expired_or_foreign_session(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock
) -> None:
    with pytest.raises(ss.SessionNotFound):
        store.append_context("missing", ["x"])
    with pytest.raises(ss.SessionNotFound):
        store.append_context(active.session_id, ["x"], owner="bob")
    clock.advance(seconds=86400)
    with pytest.raises(ss.SessionExpired):
        store.append_context(active.session_id, ["x"], owner="alice")


def test_source_append_leaves_a_ghost_or_fails_ours_writes_nothing(
    store: ss.SessionStore, client: Any, table: str
) -> None:
    """Defects 3 and 4: the source's UpdateItem upserts a missing session."""
    with pytest.raises(ClientError) as err:
        source_design.append_context_messages(client, "gone", ["hello"], 1, table=table)
    # With a version condition the upsert trips on the missing version (ConditionalCheckFailed);
    # without one it would create a ghost with no status, version or ttl:
    client.update_item(
        TableName=table,
        Key={"pk": {"S": "session#gone"}, "sk": {"S": "metadata"}},
        UpdateExpression="SET #c = list_append(if_not_exists(#c, :e), :m)",
        ExpressionAttributeNames={"#c": "context"},
        ExpressionAttributeValues={":e": {"L": []}, ":m": {"L": [{"S": "hello"}]}},
    )
    ghosts = scan(client, table)
    assert err.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert len(ghosts) == 1 and "ttl" not in ghosts[0] and "status" not in ghosts[0]
    client.delete_item(TableName=table, Key={"pk": {"S": "session#gone"}, "sk": {"S": "metadata"}})
    with pytest.raises(ss.SessionNotFound):
        store.append_context("gone", ["hello"])
    assert scan(client, table) == []


def test_lost_response_appends_once(
    store: ss.SessionStore, active: ss.Session, client: Any, requests: RequestLog
) -> None:
    with FaultInjector(client, script=[Fault.LOST_RESPONSE]) as faults:
        result = store.append_context(active.session_id, ["once"], owner="alice")
    assert faults.injected[Fault.LOST_RESPONSE] == 1
    assert requests.counts() == {"UpdateItem": 2}  # applied, response lost; retry sees token
    assert result.context == ("once",)
    assert store.get_session(active.session_id, owner="alice").version == active.version + 1


def test_lost_responses_on_every_attempt_of_botocore_then_ours(
    store: ss.SessionStore, active: ss.Session, client: Any
) -> None:
    # Five lost responses exhaust botocore's attempts; our own retry then finds the token.
    with FaultInjector(client, script=[Fault.LOST_RESPONSE] * 5) as faults:
        result = store.append_context(active.session_id, ["once"], owner="alice")
    assert faults.injected[Fault.LOST_RESPONSE] == 5
    assert result.context == ("once",)


def _raw_meta(client: Any, table: str, sid: str) -> dict[str, Any]:
    key = {"pk": {"S": f"session#{sid}"}, "sk": {"S": "metadata"}}
    item: dict[str, Any] = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    return item


def test_source_pattern_duplicates_on_a_lost_response(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    """Defect 8: the source's caller re-reads on failure and re-applies: two copies."""
    duplicates = 0
    for trial in range(3):
        sid = store.activate(store.create_session().session_id).session_id
        with FaultInjector(client, script=[Fault.LOST_RESPONSE], operations=["UpdateItem"]):
            for _attempt in range(3):  # the source design's read-then-append loop
                version = int(_raw_meta(client, table, sid)["version"]["N"])
                try:
                    source_design.append_context_messages(
                        client, sid, [f"m{trial}"], version, table=table
                    )
                    break
                except ClientError as exc:
                    assert exc.response["Error"]["Code"] == "ConditionalCheckFailedException"
        duplicates += len(_raw_meta(client, table, sid)["context"]["L"]) - 1
    assert duplicates == 3  # every lost response became a duplicate; ours: see above


def test_lost_response_on_update_status_applies_once(
    store: ss.SessionStore, active: ss.Session, client: Any
) -> None:
    with FaultInjector(client, script=[Fault.LOST_RESPONSE]):
        result = store.update_status(active.session_id, ss.Status.CLOSING, owner="alice")
    assert result.status is ss.Status.CLOSING
    assert result.version == active.version + 1


def test_item_too_large_is_refused_by_the_condition_and_writes_nothing(
    client: Any, table: str, clock: ss.ManualClock, requests: RequestLog
) -> None:
    """A full context is refused by the server-side guard in one request: the instance's hint
    is never a reason to refuse by itself (it may be another incarnation's)."""
    limit = 20_000
    store = ss.SessionStore(client, table, clock=clock, item_size_limit=limit)
    sid = store.activate(store.create_session().session_id).session_id
    chunk = "x" * 4_000
    while True:
        try:
            store.append_context(sid, [chunk])
        except ss.ItemTooLarge as err:
            too_large = err
            break
    before = store.get_session(sid)
    requests.reset()
    with pytest.raises(ss.ItemTooLarge):
        store.append_context(sid, [chunk])
    assert requests.count == 1  # one refused UpdateItem, no read, no retry
    assert too_large.limit == limit and too_large.current + too_large.added > limit
    assert sizing.item_size(_raw_meta(client, table, sid)) <= limit
    assert store.get_session(sid) == before


def test_item_too_large_from_another_instance_is_caught_by_the_condition(
    client: Any, table: str, clock: ss.ManualClock, requests: RequestLog
) -> None:
    limit = METADATA_OVERHEAD + 17_000  # room for four 4 KB messages, not five
    writer = ss.SessionStore(client, table, clock=clock, item_size_limit=limit)
    sid = writer.activate(writer.create_session().session_id).session_id
    stale = ss.SessionStore(client, table, clock=clock, item_size_limit=limit)
    stale.get_session(sid)  # caches a small contextBytes
    for _ in range(4):
        writer.append_context(sid, ["y" * 4_000])
    before = writer.get_session(sid)
    requests.reset()
    with pytest.raises(ss.ItemTooLarge):
        stale.append_context(sid, ["z" * 4_000])
    assert requests.count == 1  # the server-side guard refused it
    assert writer.get_session(sid) == before


def test_messages_that_could_never_fit_are_refused_before_sending(
    client: Any, table: str, clock: ss.ManualClock, requests: RequestLog
) -> None:
    limit = 20_000
    store = ss.SessionStore(client, table, clock=clock, item_size_limit=limit)
    sid = store.activate(store.create_session().session_id).session_id
    requests.reset()
    with pytest.raises(ss.ItemTooLarge) as caught:
        store.append_context(sid, ["x" * limit])
    assert requests.count == 0
    assert caught.value.added > limit - METADATA_OVERHEAD
    assert store.get_session(sid).version == 2


def test_largest_context_that_fits(client: Any, table: str, clock: ss.ManualClock) -> None:
    """With the default 409,600 B limit, the context list may reach limit - reserve."""
    limit = sizing.MAX_ITEM_BYTES
    store = ss.SessionStore(client, table, clock=clock)
    assert store.item_size_limit == limit
    budget = limit - METADATA_OVERHEAD
    print(f"reserve for metadata attributes: {METADATA_OVERHEAD} B; context budget {budget} B")
    # ids, stamps, tokens (ring and map) about 3 KB, and the session's attributes (4 KiB)
    assert ATTRIBUTES_MAX_BYTES < METADATA_OVERHEAD < ATTRIBUTES_MAX_BYTES + 3_500


@pytest.mark.parametrize(
    "messages",
    [
        [],
        "text",
        b"bytes",
        None,
        [float("nan")],
        [{"k": float("inf")}],
        [object()],
        [{1: "int key"}],
    ],
)
def test_bad_messages_write_nothing(
    store: ss.SessionStore,
    active: ss.Session,
    client: Any,
    table: str,
    requests: RequestLog,
    messages: Any,
) -> None:
    before = scan(client, table)
    requests.reset()
    with pytest.raises(ss.InvalidInput):
        store.append_context(active.session_id, messages, owner="alice")
    assert requests.count == 0
    assert scan(client, table) == before
