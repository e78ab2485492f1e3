"""Session attributes (issue 12): a small versioned map of JSON values on the metadata item."""

from __future__ import annotations

from typing import Any

import pytest

import sessionstore as ss
from sessionstore import sizing
from sessionstore.attributes import ATTRIBUTES_MAX_BYTES
from sessionstore.testing import Fault, FaultInjector, RequestLog

from .conftest import scan
from .items import stored


def test_create_with_attributes_and_update_in_one_request(
    store: ss.SessionStore, client: Any, table: str, requests: RequestLog
) -> None:
    created = store.create_session(owner="alice", attributes={"protocol": "2025-11-25"})
    assert dict(created.attributes) == {"protocol": "2025-11-25"}
    requests.reset()
    updated = store.update_attributes(
        created.session_id,
        {"client": {"name": "cli", "version": 1.0}, "n": 10**30},
        remove=["protocol"],
        owner="alice",
    )
    assert requests.counts() == {"UpdateItem": 1}
    assert updated.version == created.version + 1
    assert dict(updated.attributes) == {"client": {"name": "cli", "version": 1.0}, "n": 10**30}
    assert isinstance(updated.attributes["client"]["version"], float)  # exact JSON round trip
    assert store.get_session(created.session_id, owner="alice") == updated
    raw = stored(client, table, created.session_id)
    assert raw["attrs"]["M"]["client"] == {"S": '{"name":"cli","version":1.0}'}  # JSON text
    assert int(raw["attrBytes"]["N"]) >= sizing.value_size(raw["attrs"])


def test_attributes_are_a_read_only_mapping_and_sessions_stay_hashable(
    store: ss.SessionStore, active: ss.Session
) -> None:
    s = store.update_attributes(active.session_id, {"title": "t"}, owner="alice")
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
    assert requests.count == 1
    assert caught.value.current.attributes == {"a": 1}
    ok = store.update_attributes(
        active.session_id, {"a": 3}, owner="alice", expected_version=active.version + 1
    )
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
    mine = store.update_attributes(active.session_id, {"a": "mine"}, owner="alice")
    assert requests.counts() == {"UpdateItem": 1}
    assert mine.attributes == {"a": "mine", "b": 1}  # last writer wins per name
    assert mine.version == active.version + 2


def test_lost_response_never_applies_twice(
    store: ss.SessionStore, active: ss.Session, client: Any, requests: RequestLog
) -> None:
    with FaultInjector(client, script=[Fault.LOST_RESPONSE]) as faults:
        result = store.update_attributes(active.session_id, {"a": 1}, owner="alice")
    assert faults.injected[Fault.LOST_RESPONSE] == 1
    assert requests.counts() == {"UpdateItem": 2}  # applied, lost; the retry finds its token
    assert result.version == active.version + 1
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
    assert stored(client, table, sid)["attrs"]["M"] == {"closing": {"S": "true"}}


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
        s = store.update_attributes(sid, {"doc": f"{n}" * 1_000}, owner="alice")
    assert s.version == active.version + 10
    raw = stored(client, table, sid)
    assert int(raw["attrBytes"]["N"]) <= ATTRIBUTES_MAX_BYTES
    assert int(raw["attrBytes"]["N"]) >= sizing.value_size(raw["attrs"])
    # Really too large: refused by the exact size, nothing written.
    before = stored(client, table, sid)
    with pytest.raises(ss.ItemTooLarge):
        store.update_attributes(sid, {"more": "y" * 3_500}, owner="alice")
    assert stored(client, table, sid) == before
    # Removing makes room again.
    s = store.update_attributes(sid, {"more": "y" * 3_500}, remove=["doc"], owner="alice")
    assert set(s.attributes) == {"more"}


def test_create_refuses_attributes_past_the_limit(
    store: ss.SessionStore, requests: RequestLog
) -> None:
    with pytest.raises(ss.ItemTooLarge):
        store.create_session(attributes={f"k{i}": "v" * 500 for i in range(9)})
    assert requests.count == 0
