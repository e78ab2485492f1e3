"""Session attributes (issue 12): a small versioned map of JSON values in an item beside the
metadata item (issue 21: so that the writes every call makes are not billed for them)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import sessionstore as ss
from sessionstore import schema, sizing
from sessionstore.attributes import ATTRIBUTES_MAX_BYTES
from sessionstore.testing import Fault, FaultInjector, RequestLog
from tests.conftest import scan
from tests.support.items import stored


def _values_size(raw: dict[str, Any]) -> int:
    """What the attributes themselves take in their item (wire form)."""
    fields = {"pk", "sk", "incarnation", "rev", "attrBytes", "ttl"}
    return sizing.item_size({k: v for k, v in raw.items() if k not in fields})


def test_create_with_attributes_and_update_in_one_transaction(
    store: ss.SessionStore, client: Any, table: str, requests: RequestLog
) -> None:
    created = store.create_session(owner="alice", attributes={"protocol": "2025-11-25"})
    assert dict(created.attributes) == {"protocol": "2025-11-25"}
    requests.reset()
    store.update_attributes(
        created.session_id,
        {"client": {"name": "cli", "version": 1.0}, "n": 10**30},
        remove=["protocol"],
        owner="alice",
    )
    # Both items in one transaction, and nothing read back: one request.
    assert requests.counts() == {"TransactWriteItems": 1}
    updated = store.get_session(created.session_id, owner="alice")
    assert updated.version == created.version + 1
    assert dict(updated.attributes) == {"client": {"name": "cli", "version": 1.0}, "n": 10**30}
    assert isinstance(updated.attributes["client"]["version"], float)  # exact JSON round trip
    assert store.get_session(created.session_id, owner="alice") == updated
    meta = stored(client, table, created.session_id)
    assert "attrs" not in meta and meta["attrsRev"] == {"N": "2"}
    raw = stored(client, table, created.session_id, schema.ATTRS_SK)
    assert raw["rev"] == {"N": "2"} and raw["incarnation"] == meta["incarnation"]
    assert raw["client"] == {"S": '{"name":"cli","version":1.0}'}  # JSON text
    assert int(raw["attrBytes"]["N"]) >= _values_size(raw)


def test_attributes_are_a_read_only_mapping_and_sessions_stay_hashable(
    store: ss.SessionStore, active: ss.Session
) -> None:
    store.update_attributes(active.session_id, {"title": "t"}, owner="alice")
    s = store.get_session(active.session_id, owner="alice")
    with pytest.raises(TypeError):
        s.attributes["title"] = "other"  # type: ignore[index]
    assert s.attributes == {"title": "t"} and "title" in s.attributes and len(s.attributes) == 1
    with pytest.raises(TypeError):
        hash(s.attributes)
    again = store.get_session(active.session_id, owner="alice")
    assert again == s and hash(again) == hash(s)
    assert s != active  # the attributes (and version) differ


def test_expected_version_conflict_in_one_request(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    store.update_attributes(active.session_id, {"a": 1}, owner="alice")
    requests.reset()
    with pytest.raises(ss.VersionConflict) as caught:
        store.update_attributes(
            active.session_id, {"a": 2}, owner="alice", expected_version=active.version
        )
    # One request: the attributes the conflict carries are this instance's copy, kept current
    # by its own change without reading it back.
    assert requests.count == 1
    assert caught.value.current.attributes == {"a": 1}
    store.update_attributes(
        active.session_id, {"a": 3}, owner="alice", expected_version=active.version + 1
    )
    ok = store.get_session(active.session_id, owner="alice")
    assert ok.attributes == {"a": 3} and ok.version == active.version + 2


def test_rival_writes_cost_no_retry_without_expected_version(
    client: Any,
    table: str,
    clock: ss.ManualClock,
    store: ss.SessionStore,
    active: ss.Session,
    requests: RequestLog,
) -> None:
    rival = ss.SessionStore(client, table, clock=clock)
    rival.update_attributes(active.session_id, {"a": "rival", "b": 1}, owner="alice")
    requests.reset()
    store.update_attributes(active.session_id, {"a": "mine"}, owner="alice")
    assert requests.counts() == {"TransactWriteItems": 1}  # no refusal, no retry, no read
    mine = store.get_session(active.session_id, owner="alice")
    assert mine.attributes == {"a": "mine", "b": 1}  # last writer wins per name
    assert mine.version == active.version + 2


def test_lost_response_never_applies_twice(
    store: ss.SessionStore, active: ss.Session, client: Any, requests: RequestLog
) -> None:
    with FaultInjector(client, script=[Fault.LOST_RESPONSE]) as faults:
        store.update_attributes(active.session_id, {"a": 1}, owner="alice")
    assert faults.injected[Fault.LOST_RESPONSE] == 1
    # Applied, lost; the retry is refused and finds its token.
    assert requests.counts() == {"TransactWriteItems": 2}
    assert store.get_session(active.session_id, owner="alice").version == active.version + 1


def test_missing_foreign_expired_and_closed(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str, clock: ss.ManualClock
) -> None:
    sid = active.session_id
    with pytest.raises(ss.SessionNotFound):
        store.update_attributes("missing", {"a": 1})
    with pytest.raises(ss.SessionNotFound):
        store.update_attributes(sid, {"a": 1}, owner="bob")
    store.begin_close(sid, owner="alice")
    store.update_attributes(sid, {"closing": True}, owner="alice")  # any status but closed
    store.close(sid, owner="alice")
    with pytest.raises(ss.SessionNotActive):
        store.update_attributes(sid, {"a": 1}, owner="alice")
    clock.advance(seconds=86_400)
    before = scan(client, table)
    with pytest.raises(ss.SessionExpired):
        store.update_attributes(sid, {"a": 1}, owner="alice")
    assert scan(client, table) == before
    assert stored(client, table, sid, schema.ATTRS_SK)["closing"] == {"S": "true"}


@pytest.mark.parametrize(
    ("changes", "remove"),
    [
        ({}, ()),
        ({"": 1}, ()),
        ({"1abc": 1}, ()),
        ({"has space": 1}, ()),
        ({"x" * 65: 1}, ()),
        ({"status": 1}, ()),
        ({"Version": 1}, ()),
        ({"ttl": 1}, ()),
        ({"a": float("nan")}, ()),
        ({"a": {1, 2}}, ()),
        ({"a": 1}, ("a",)),
        ({}, ("bad name",)),
        ({}, "a"),
        ([("a", 1)], ()),
        ({"é": 1}, ()),
    ],
)
def test_bad_input_sends_nothing(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog, changes: Any, remove: Any
) -> None:
    requests.reset()
    with pytest.raises(ss.InvalidInput):
        store.update_attributes(active.session_id, changes, remove=remove, owner="alice")
    if remove == ():  # the same names and values are refused at creation too
        with pytest.raises(ss.InvalidInput):
            store.create_session(attributes=changes if changes else [])
    assert requests.count == 0


def test_size_is_bounded_and_a_stale_bound_is_recomputed(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str, requests: RequestLog
) -> None:
    sid = active.session_id
    requests.reset()
    with pytest.raises(ss.ItemTooLarge) as caught:
        store.update_attributes(sid, {"big": "x" * ATTRIBUTES_MAX_BYTES}, owner="alice")
    assert requests.count == 0 and caught.value.what == "attributes"
    # Rewriting one 1 KB value: the upper bound grows by ~1 KB each time, the map does not.
    for n in range(10):
        store.update_attributes(sid, {"doc": f"{n}" * 1_000}, owner="alice")
    s = store.get_session(sid, owner="alice")
    assert s.version == active.version + 10
    raw = stored(client, table, sid, schema.ATTRS_SK)
    assert int(raw["attrBytes"]["N"]) <= ATTRIBUTES_MAX_BYTES
    assert int(raw["attrBytes"]["N"]) >= _values_size(raw)
    # Really too large: refused by the exact size, nothing written.
    before = scan(client, table)
    with pytest.raises(ss.ItemTooLarge):
        store.update_attributes(sid, {"more": "y" * 3_500}, owner="alice")
    assert scan(client, table) == before
    # Removing makes room again.
    store.update_attributes(sid, {"more": "y" * 3_500}, remove=["doc"], owner="alice")
    assert set(store.get_session(sid, owner="alice").attributes) == {"more"}


def test_create_refuses_attributes_past_the_limit(
    store: ss.SessionStore, requests: RequestLog
) -> None:
    with pytest.raises(ss.ItemTooLarge):
        store.create_session(attributes={f"k{i}": "v" * 500 for i in range(9)})
    assert requests.count == 0


def test_the_metadata_item_stays_small_whatever_the_attributes(
    store: ss.SessionStore, client: Any, table: str
) -> None:
    small = store.create_session(owner="alice")
    full = store.create_session(owner="alice", attributes={"doc": "x" * 4_000})
    sizes = [sizing.item_size(stored(client, table, s.session_id)) for s in (small, full)]
    assert sizes[0] == sizes[1] < 400  # the 4 KB are in the attributes item
    assert sizing.item_size(stored(client, table, full.session_id, schema.ATTRS_SK)) > 4_000


def test_another_instances_change_is_read_with_the_session(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore, requests: RequestLog
) -> None:
    created = store.create_session(owner="alice", attributes={"a": 1})
    requests.reset()
    assert store.activate(created.session_id, owner="alice").attributes == {"a": 1}
    assert requests.counts() == {"UpdateItem": 1}  # its own copy is current: nothing to read
    other = ss.SessionStore(client, table, clock=clock)
    other.update_attributes(created.session_id, {"b": 2}, owner="alice")
    requests.reset()
    closing = store.begin_close(created.session_id, owner="alice")
    assert closing.attributes == {"a": 1, "b": 2} and closing.attributes_rev == 2
    assert requests.counts() == {"UpdateItem": 1, "GetItem": 1}  # attrsRev moved: read once
    assert store.load(created.session_id, owner="alice").session == closing


def test_an_earlier_sessions_attributes_are_not_inherited(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore
) -> None:
    first = store.create_session("reused", owner="alice", ttl_seconds=60, attributes={"a": 1})
    clock.advance(seconds=61)
    # TTL removed the metadata item but not (yet) the attributes item: both are deleted late.
    client.delete_item(TableName=table, Key=schema.meta_key("reused"))
    second = store.create_session("reused", owner="alice")
    assert second.attributes == {} and second.incarnation != first.incarnation
    assert store.get_session("reused", owner="alice").attributes == {}
    fresh = ss.SessionStore(client, table, clock=clock)
    fresh.update_attributes("reused", {"b": 2}, owner="alice")
    changed = fresh.get_session("reused", owner="alice")
    assert changed.attributes == {"b": 2}  # the old item was replaced whole, not merged into
    raw = stored(client, table, "reused", schema.ATTRS_SK)
    assert raw["incarnation"]["S"] == second.incarnation and raw["rev"] == {"N": "1"}


def _refused_reads(client: Any, operation: str) -> Any:
    """Answer every ``operation`` with a refusal (nothing read), as DynamoDB would one it denies."""
    from botocore.awsrequest import AWSResponse

    body = b'{"__type": "com.amazonaws.dynamodb.v20120810#AccessDeniedException", "message": "no"}'

    class Raw:
        def stream(self, **_: Any) -> Any:
            yield body

    def answer(request: Any, **_: Any) -> AWSResponse:
        headers: Any = {"Content-Type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, 400, headers, Raw())

    client.meta.events.register(f"before-send.dynamodb.{operation}", answer)
    return answer


def test_a_landed_write_whose_attributes_read_fails_says_it_was_applied(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore
) -> None:
    """Review: the write landed, then the read of the attributes for its result failed, and the
    caller was told nothing was written -- a retried append stored its messages twice."""
    sid = store.create_session(owner="alice", attributes={"a": 1}).session_id
    store.activate(sid, owner="alice")
    ss.SessionStore(client, table, clock=clock).update_attributes(sid, {"b": 2}, owner="alice")
    handler = _refused_reads(client, "GetItem")
    try:
        with pytest.raises(ss.Unavailable) as caught:
            # Our copy of the attributes is stale: they are read after the append.
            store.append_context(sid, ["once"], owner="alice")
    finally:
        client.meta.events.unregister("before-send.dynamodb.GetItem", handler)
    assert caught.value.maybe_applied and "was applied" in str(caught.value)
    assert list(store.load(sid, owner="alice").context) == ["once"]


def test_an_attribute_change_outrun_by_rivals_ends_typed(
    client: Any, table: str, clock: ss.ManualClock
) -> None:
    """Review: refused only on the attributes item (every whole-map Put lost to a rival's
    change), the change ended in a bare AssertionError."""
    owner = ss.SessionStore(client, table, clock=clock)
    sid = owner.create_session(attributes={"doc": "x" * 3000}).session_id
    mine = ss.SessionStore(
        client, table, clock=clock, retry=ss.RetryPolicy(max_attempts=2, sleep=lambda _s: None)
    )
    sends = 0

    def rival_first(**_: Any) -> None:
        nonlocal sends
        sends += 1
        if sends == 2:  # between our refused by-name attempt and our whole-map Put
            owner.update_attributes(sid, {"other": 1})

    client.meta.events.register("before-send.dynamodb.TransactWriteItems", rival_first)
    try:
        with pytest.raises(ss.Unavailable) as caught:
            mine.update_attributes(sid, {"doc": "y" * 3000})
    finally:
        client.meta.events.unregister("before-send.dynamodb.TransactWriteItems", rival_first)
    assert not caught.value.maybe_applied
    assert owner.get_session(sid).attributes["doc"] == "x" * 3000


def test_a_change_keeps_this_instances_copy_current_until_another_change_follows(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore, requests: RequestLog
) -> None:
    """Nothing is read back after a change, yet the next session this instance returns carries
    the attributes without a read -- unless another change landed after it (then ``attrsRev``
    is past the copy's ``rev``, and they are read once)."""
    sid = store.create_session(owner="alice", attributes={"a": 1}).session_id
    store.update_attributes(sid, {"b": 2}, owner="alice")
    requests.reset()
    assert store.activate(sid, owner="alice").attributes == {"a": 1, "b": 2}
    assert requests.counts() == {"UpdateItem": 1}
    store.update_attributes(sid, {"c": 3}, remove=["a"], owner="alice")
    ss.SessionStore(client, table, clock=clock).update_attributes(sid, {"d": 4}, owner="alice")
    requests.reset()
    assert store.touch(sid, owner="alice").attributes == {"b": 2, "c": 3, "d": 4}
    assert requests.counts() == {"UpdateItem": 1, "GetItem": 1}


def _race_a_reader_with(
    client: Any, store: ss.SessionStore, sid: str, change: Any, rival: Any
) -> ss.Session:
    """Run ``change`` (an attribute change on ``store``); just before it is sent, run ``rival``
    (another change, acknowledged) and then the metadata read of ``get_session`` on ``store``
    in a thread, whose attributes are attached only after ``change`` has returned: the
    reader's session, which must show ``rival``'s change."""
    read, changed = threading.Event(), threading.Event()
    result: list[ss.Session] = []
    sends = 0

    def hold_the_reader(**_: Any) -> None:
        if threading.current_thread() is reader and not read.is_set():
            read.set()  # its metadata read is done: attach after the change has returned
            assert changed.wait(10)

    def rival_then_reader(**_: Any) -> None:
        nonlocal sends
        sends += 1
        if sends == 1:  # the change's first send: it has computed its copy from rev 1
            rival()
            reader.start()
            assert read.wait(10)

    reader = threading.Thread(target=lambda: result.append(store.get_session(sid, owner="alice")))
    client.meta.events.register("after-call.dynamodb.GetItem", hold_the_reader)
    client.meta.events.register("before-send.dynamodb.TransactWriteItems", rival_then_reader)
    try:
        change()
    finally:
        changed.set()
        client.meta.events.unregister("before-send.dynamodb.TransactWriteItems", rival_then_reader)
        reader.join(10)
        client.meta.events.unregister("after-call.dynamodb.GetItem", hold_the_reader)
    assert len(result) == 1
    return result[0]


@pytest.mark.parametrize("rival_instance", ["same", "another"])
def test_a_concurrent_change_never_leaves_a_wrong_copy(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore, rival_instance: str
) -> None:
    """Review: two changes started from copy rev 1; the rival landed as rev 2, the change as
    rev 3 and kept its guess labelled rev 2; a reader whose metadata read saw ``attrsRev`` 2
    returned the attributes without the rival's change, acknowledged before it began."""
    sid = store.create_session(owner="alice", attributes={"a": 1}).session_id
    other = store if rival_instance == "same" else ss.SessionStore(client, table, clock=clock)
    other.get_session(sid, owner="alice")
    seen = _race_a_reader_with(
        client,
        store,
        sid,
        lambda: store.update_attributes(sid, {"mine": 1}, owner="alice"),
        lambda: other.update_attributes(sid, {"rival": 1}, owner="alice"),
    )
    assert seen.attributes_rev == 2
    # A change made after the read may show (its GetItem came later), never one missing.
    assert {"a": 1, "rival": 1}.items() <= dict(seen.attributes).items()
    # And every later read shows both.
    assert store.get_session(sid, owner="alice").attributes == {"a": 1, "rival": 1, "mine": 1}


def test_a_changes_token_stays_in_the_map_only_until_its_copy_is_confirmed(
    client: Any, table: str, store: ss.SessionStore, requests: RequestLog
) -> None:
    """The copy a change guessed is trusted once a metadata item names the change's token at
    its rev; until then the token stays in ``tk`` -- and no longer: the next write removes it."""
    sid = store.create_session(owner="alice", attributes={"a": 1}).session_id
    store.activate(sid, owner="alice")
    store.update_attributes(sid, {"b": 2}, owner="alice")
    requests.reset()
    appended = store.append_context(sid, ["m"], owner="alice")
    assert appended.attributes == {"a": 1, "b": 2}  # the guess, confirmed: nothing read
    assert requests.counts() == {"UpdateItem": 1, "PutItem": 1}
    assert len(stored(client, table, sid)["tk"]["M"]) == 2  # the change's and the append's
    store.append_context(sid, ["n"], owner="alice")
    assert len(stored(client, table, sid)["tk"]["M"]) == 1  # both removed: only the last one


def test_changes_that_read_nothing_leave_no_token_behind(
    client: Any, table: str, store: ss.SessionStore
) -> None:
    """A writer that only changes attributes never sees a metadata item to confirm its guess:
    its next change drops the guess, and the one after removes the token."""
    sid = store.create_session(owner="alice", attributes={"a": 1}).session_id
    store.activate(sid, owner="alice")
    for n in range(4):
        store.update_attributes(sid, {"n": n}, owner="alice")
    # Only the last change's token: the first one's guess was dropped by the second change,
    # which removed its token.
    assert len(stored(client, table, sid)["tk"]["M"]) == 1
    assert store.get_session(sid, owner="alice").attributes == {"a": 1, "n": 3}
