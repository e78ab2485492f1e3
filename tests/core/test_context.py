"""append_context: a reservation on the metadata item and one page, versioned, never a ghost,
exactly once under lost responses, within the context limits."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

import sessionstore as ss
from sessionstore import sizing
from sessionstore.item import METADATA_OVERHEAD
from sessionstore.testing import Fault, FaultInjector, RequestLog
from sessionstore.tutorial import source_design
from sessionstore.write_tokens import TOKEN_CAP, TOKEN_HORIZON_S
from tests.conftest import scan
from tests.support.items import stored


def _context(store: ss.SessionStore, sid: str, owner: str | None = "alice") -> list[Any]:
    return list(store.context(sid, owner=owner))


def _pages(client: Any, table: str) -> dict[str, tuple[int, list[str]]]:
    """Every page item: sk -> (first seq, message texts)."""
    return {
        i["sk"]["S"]: (int(i["first"]["N"]), [m["S"] for m in i["messages"]["L"]])
        for i in scan(client, table)
        if i["sk"]["S"].startswith("msg#")
    }


def test_append_reserves_on_the_metadata_item_then_writes_one_page(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str, requests: RequestLog
) -> None:
    s1 = store.append_context(active.session_id, [{"role": "user", "content": "hi"}], owner="alice")
    s2 = store.append_context(active.session_id, ["a", "b"], owner="alice")
    assert requests.operations == ["UpdateItem", "PutItem"] * 2
    assert (s1.version, s2.version) == (active.version + 1, active.version + 2)
    assert (s1.message_count, s2.message_count) == (1, 3)
    assert _context(store, active.session_id) == [{"role": "user", "content": "hi"}, "a", "b"]
    assert s2.context_bytes == len('{"role":"user","content":"hi"}"a""b"')
    # keyed by each page's last seq, so key order is message order
    assert _pages(client, table) == {
        "msg#000000000000": (0, ['{"role":"user","content":"hi"}']),
        "msg#000000000002": (1, ['"a"', '"b"']),
    }
    meta = stored(client, table, active.session_id)
    assert "context" not in meta and meta["messageCount"] == {"N": "3"}


def test_expected_version_conflict_carries_the_current_session(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    store.append_context(active.session_id, ["first"], owner="alice")
    requests.reset()
    with pytest.raises(ss.VersionConflict) as err:
        store.append_context(
            active.session_id, ["stale"], owner="alice", expected_version=active.version
        )
    assert requests.operations == ["UpdateItem"]  # refused: no page written
    assert err.value.current.version == active.version + 1
    assert err.value.current.message_count == 1
    assert _context(store, active.session_id) == ["first"]


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
    assert requests.operations == ["UpdateItem", "PutItem"]
    requests.reset()
    mine = store.append_context(active.session_id, ["mine"], owner="alice")  # stale hint
    assert requests.operations == ["UpdateItem", "PutItem"]
    assert _context(store, active.session_id) == ["theirs", "mine"]
    assert (theirs.version, mine.version) == (active.version + 1, active.version + 2)


def test_append_tokens_stay_bounded_and_are_cleaned(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore, active: ss.Session
) -> None:
    """Each append names its token in ``tk``; the instance's next write removes its finished
    ones, and tokens past the horizon are anyone's to remove."""
    sid = active.session_id
    for n in range(5):
        store.append_context(sid, [n], owner="alice")
    assert set(stored(client, table, sid)["tk"]["M"]) == {"t-0007"}  # only the last one
    writers = [
        ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds(f"w{i}")) for i in range(3)
    ]
    for w in writers:
        w.append_context(sid, ["x"], owner="alice")  # three instances that never come back
    assert len(stored(client, table, sid)["tk"]["M"]) == 4
    clock.advance(seconds=TOKEN_HORIZON_S + 1)
    store.append_context(sid, ["late"], owner="alice")
    store.append_context(sid, ["later"], owner="alice")  # saw them old in the last ALL_NEW
    assert len(stored(client, table, sid)["tk"]["M"]) == 1


def test_a_token_map_full_of_live_writes_refuses_until_the_horizon_frees_it(
    client: Any, table: str, clock: ss.ManualClock, active: ss.Session, requests: RequestLog
) -> None:
    """TOKEN_CAP live tokens of instances that never came back: a new instance's append is
    refused at once (one UpdateItem, nothing written: ``Unavailable(maybe_applied=False)``);
    once the tokens are past the horizon its next append removes them and lands."""
    sid = active.session_id
    for i in range(TOKEN_CAP - len(stored(client, table, sid)["tk"]["M"])):
        ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds(f"w{i}")).append_context(
            sid, [i], owner="alice"
        )
    assert len(stored(client, table, sid)["tk"]["M"]) == TOKEN_CAP
    before = scan(client, table)
    late = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds("late"))
    requests.reset()
    with pytest.raises(ss.Unavailable) as refused:
        late.append_context(sid, ["late"], owner="alice")
    assert not refused.value.maybe_applied
    assert requests.operations == ["UpdateItem"]
    assert scan(client, table) == before
    clock.advance(seconds=TOKEN_HORIZON_S + 1)
    requests.reset()
    late.append_context(sid, ["late"], owner="alice")
    # the refusal's item showed them; now they are old: removed, one UpdateItem
    assert requests.operations == ["UpdateItem", "PutItem"]
    left = set(stored(client, table, sid)["tk"]["M"])
    assert "latet-0002" in left and len(left) <= 2  # a write removes at most TOKEN_CAP
    assert _context(store_of(client, table, clock), sid)[-1] == "late"


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
    # applied, response lost; the retry finds the token and the seq it reserved
    assert requests.operations == ["UpdateItem", "UpdateItem", "PutItem"]
    assert _context(store, active.session_id) == ["once"]
    assert result.version == active.version + 1
    assert store.get_session(active.session_id, owner="alice").version == active.version + 1


def test_lost_response_on_the_page_writes_it_once(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str, requests: RequestLog
) -> None:
    with FaultInjector(client, script=[Fault.LOST_RESPONSE], operations=["PutItem"]) as faults:
        store.append_context(active.session_id, ["once"], owner="alice")
    assert faults.injected[Fault.LOST_RESPONSE] == 1
    assert requests.operations == ["UpdateItem", "PutItem", "PutItem"]  # re-sent, refused: ours
    assert _pages(client, table) == {"msg#000000000000": (0, ['"once"'])}
    assert _context(store, active.session_id) == ["once"]


def test_lost_responses_on_every_attempt_of_botocore_then_ours(
    store: ss.SessionStore, active: ss.Session, client: Any
) -> None:
    # Five lost responses exhaust botocore's attempts; our own retry then finds the token.
    with FaultInjector(client, script=[Fault.LOST_RESPONSE] * 5) as faults:
        store.append_context(active.session_id, ["once"], owner="alice")
    assert faults.injected[Fault.LOST_RESPONSE] == 5
    assert _context(store, active.session_id) == ["once"]
    with FaultInjector(client, script=[Fault.LOST_RESPONSE] * 5, operations=["PutItem"]):
        store.append_context(active.session_id, ["twice"], owner="alice")
    assert _context(store, active.session_id) == ["once", "twice"]


def test_source_pattern_duplicates_on_a_lost_response(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    """Defect 8: the source's caller re-reads on failure and re-applies: two copies."""
    duplicates = 0
    for trial in range(3):
        sid = store.activate(store.create_session().session_id).session_id
        with FaultInjector(client, script=[Fault.LOST_RESPONSE], operations=["UpdateItem"]):
            for _attempt in range(3):  # the source design's read-then-append loop
                version = int(stored(client, table, sid)["version"]["N"])
                try:
                    source_design.append_context_messages(
                        client, sid, [f"m{trial}"], version, table=table
                    )
                    break
                except ClientError as exc:
                    assert exc.response["Error"]["Code"] == "ConditionalCheckFailedException"
        duplicates += len(stored(client, table, sid)["context"]["L"]) - 1
    assert duplicates == 3  # every lost response became a duplicate; ours: see above


def test_lost_response_on_update_status_applies_once(
    store: ss.SessionStore, active: ss.Session, client: Any
) -> None:
    with FaultInjector(client, script=[Fault.LOST_RESPONSE]):
        result = store.update_status(active.session_id, ss.Status.CLOSING, owner="alice")
    assert result.status is ss.Status.CLOSING
    assert result.version == active.version + 1


def store_of(client: Any, table: str, clock: ss.ManualClock, **limits: int) -> ss.SessionStore:
    return ss.SessionStore(client, table, clock=clock, **limits)


@pytest.mark.parametrize(
    ("limits", "message"),
    [({"max_context_messages": 5}, "m"), ({"max_context_bytes": 5 * 1_002}, "x" * 1_000)],
)
def test_a_full_context_is_refused_by_the_condition_and_writes_nothing(
    client: Any,
    table: str,
    clock: ss.ManualClock,
    requests: RequestLog,
    limits: dict[str, int],
    message: str,
) -> None:
    """Five messages fit, the sixth does not -- refused by the server-side guard in one request,
    for this instance and for one whose hint is stale (a hint never refuses by itself)."""
    store = store_of(client, table, clock, **limits)
    sid = store.activate(store.create_session().session_id).session_id
    stale = store_of(client, table, clock, **limits)
    stale.get_session(sid)  # remembers an empty context
    for _ in range(5):
        store.append_context(sid, [message])
    before = scan(client, table)
    for instance in (store, stale):
        requests.reset()
        with pytest.raises(ss.ContextFull) as caught:
            instance.append_context(sid, [message])
        assert requests.operations == ["UpdateItem"]
        assert scan(client, table) == before
    err = caught.value
    assert (err.messages, err.bytes) == (5, 5 * len(f'"{message}"'))
    assert (err.added_messages, err.added_bytes) == (1, len(f'"{message}"'))
    assert "is full" in str(err)


def test_an_append_over_the_limits_by_itself_is_refused_before_sending(
    client: Any, table: str, clock: ss.ManualClock, requests: RequestLog
) -> None:
    store = store_of(client, table, clock, max_context_messages=3, max_context_bytes=100)
    sid = store.activate(store.create_session().session_id).session_id
    requests.reset()
    with pytest.raises(ss.ContextFull):
        store.append_context(sid, ["a", "b", "c", "d"])
    with pytest.raises(ss.ContextFull):
        store.append_context(sid, ["x" * 100])
    assert requests.count == 0
    assert store.get_session(sid).version == 2


def test_a_page_that_could_not_fit_one_item_is_refused_before_sending(
    client: Any, table: str, clock: ss.ManualClock, requests: RequestLog
) -> None:
    limit = METADATA_OVERHEAD + 1_000
    store = ss.SessionStore(client, table, clock=clock, item_size_limit=limit)
    sid = store.activate(store.create_session().session_id).session_id
    store.append_context(sid, ["x" * (limit - 300)])  # a page of its own: fits
    requests.reset()
    with pytest.raises(ss.ItemTooLarge) as caught:
        store.append_context(sid, ["x" * limit])
    assert requests.count == 0
    assert caught.value.what == "context page" and caught.value.added > limit
    assert store.get_session(sid).version == 3


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, 10**15])
def test_context_limits_are_validated(client: Any, table: str, limit: Any) -> None:
    with pytest.raises(ss.InvalidInput):
        ss.SessionStore(client, table, max_context_messages=limit)
    with pytest.raises(ss.InvalidInput):
        ss.SessionStore(client, table, max_context_bytes=limit if limit != 10**15 else 10**16)


def test_the_metadata_item_is_bounded_however_long_the_context(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    """Its size no longer follows the context: what every write to it is billed stays flat."""
    sid = active.session_id
    sizes = []
    for n in range(40):
        store.append_context(sid, ["m" * 2_000], owner="alice")
        if n in (19, 39):
            sizes.append(sizing.item_size(stored(client, table, sid)))
    assert sizes[0] == sizes[1] < 2 * sizing.WRITE_UNIT_BYTES
    # the widest item it could ever be: ids, stamps, a full token map, 4 KiB attributes
    assert sizes[1] < METADATA_OVERHEAD < 8_500


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
