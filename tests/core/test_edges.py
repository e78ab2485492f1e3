"""Issue 9: the store's write paths at their edges, one test per defect the review found.

Faults are injected on a client whose botocore retries are off (``max_attempts=1``), so each
injected fault reaches the store's own attempt driver directly and a test needs no sleeps.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

import sessionstore as ss
from sessionstore import claims, schema, sizing, wire
from sessionstore.attributes import ATTRIBUTES_MAX_BYTES
from sessionstore.context import IN_FLIGHT_S
from sessionstore.retry import RetryPolicy
from sessionstore.testing import Fault, FaultInjector, RequestLog
from sessionstore.write_tokens import TOKEN_CAP
from tests.conftest import scan


def _store(engine: Any, table: str, clock: ss.ManualClock, attempts: int, **kw: Any) -> Any:
    client = ss.connect(engine.endpoint_url, max_attempts=1)  # botocore does not retry
    retry = RetryPolicy(max_attempts=attempts, sleep=lambda _s: None)
    return ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds(), retry=retry, **kw)


def _meta(client: Any, table: str, sid: str) -> dict[str, Any]:
    item = client.get_item(TableName=table, Key=schema.meta_key(sid), ConsistentRead=True)
    return wire.to_python(item.get("Item")) or {}


def _sweep(client: Any, table: str, *sks: str, sid: str) -> None:
    """What DynamoDB's TTL sweeper does, late and one item at a time."""
    for sk in sks:
        client.delete_item(TableName=table, Key={"pk": {"S": schema.pk(sid)}, "sk": {"S": sk}})


# ------------------------------------------------ 1. write loops that ended on a swallowed fault


def test_create_whose_only_attempt_got_a_500_raises_instead_of_returning_a_session(
    engine: Any, table: str, clock: ss.ManualClock
) -> None:
    store = _store(engine, table, clock, attempts=1)
    with (
        FaultInjector(store.client, script=[Fault.SERVER_ERROR]),
        pytest.raises(ss.Unavailable) as caught,
    ):
        store.create_session("s1")
    assert caught.value.maybe_applied  # a 500 may have been applied: the caller must not assume
    assert caught.value.__cause__ is not None  # botocore's error, not an internal one
    assert scan(store.client, table) == []
    with pytest.raises(ss.SessionNotFound):
        store.get_session("s1")


def test_create_settles_a_500_with_its_second_attempt(
    engine: Any, table: str, clock: ss.ManualClock
) -> None:
    store = _store(engine, table, clock, attempts=2)
    with FaultInjector(store.client, script=[Fault.SERVER_ERROR]):
        session = store.create_session("s1")
    assert store.get_session("s1") == session


@pytest.mark.parametrize("fault", [Fault.SERVER_ERROR, Fault.LOST_RESPONSE])
def test_transition_that_ran_out_of_attempts_raises_unavailable_not_assertion_error(
    engine: Any, table: str, clock: ss.ManualClock, fault: Fault
) -> None:
    store = _store(engine, table, clock, attempts=1)
    sid = store.create_session().session_id
    with FaultInjector(store.client, script=[fault]), pytest.raises(ss.Unavailable) as caught:
        store.activate(sid)
    assert caught.value.maybe_applied
    landed = fault is Fault.LOST_RESPONSE
    assert store.get_session(sid).status is (ss.Status.ACTIVE if landed else ss.Status.INITIALIZING)


@pytest.mark.parametrize("fault", [Fault.SERVER_ERROR, Fault.LOST_RESPONSE])
def test_record_that_ran_out_of_attempts_raises_unavailable_not_assertion_error(
    engine: Any, table: str, clock: ss.ManualClock, fault: Fault
) -> None:
    store = _store(engine, table, clock, attempts=1)
    sid = store.activate(store.create_session().session_id).session_id
    with FaultInjector(store.client, script=[fault]), pytest.raises(ss.Unavailable) as caught:
        store.record_tool_call(sid, "c1", "t", {}, 1, 0)
    assert caught.value.maybe_applied
    # Calling again is the documented answer to maybe_applied: exactly one record either way.
    store.record_tool_call(sid, "c1", "t", {}, 1, 0)
    assert [r.tool_call_id for r in store.tool_calls(sid)] == ["c1"]


def test_pinned_write_whose_last_attempt_was_lost_is_not_reported_as_a_conflict(
    engine: Any, table: str, clock: ss.ManualClock
) -> None:
    store = _store(engine, table, clock, attempts=2)
    sid = store.activate(store.create_session().session_id).session_id
    rival = ss.SessionStore(ss.connect(engine.endpoint_url), table, clock=clock)
    rival.append_context(sid, ["rival"])  # our hint is now stale: attempt 1 is refused
    with (
        FaultInjector(store.client, script=[None, Fault.LOST_RESPONSE], operations=["UpdateItem"]),
        pytest.raises(ss.Unavailable) as caught,
    ):
        store.update_status(sid, ss.Status.CLOSING)
    # Before: ConflictRetriesExhausted, and a caller retrying on it could apply twice.
    assert not isinstance(caught.value, ss.ConflictRetriesExhausted)
    assert caught.value.maybe_applied
    assert store.get_session(sid).status is ss.Status.CLOSING


@pytest.mark.parametrize("operation", ["update_status", "append with expected_version"])
def test_conflict_retries_exhausted_only_when_every_attempt_was_refused(
    engine: Any, table: str, clock: ss.ManualClock, operation: str
) -> None:
    store = _store(engine, table, clock, attempts=3)
    sid = store.activate(store.create_session().session_id).session_id
    rival = ss.SessionStore(ss.connect(engine.endpoint_url), table, clock=clock)

    def rival_first(**_: Any) -> None:  # a rival write lands before every attempt of ours
        rival.append_context(sid, ["rival"])

    def ours() -> Any:
        if operation == "update_status":
            return store.update_status(sid, ss.Status.CLOSING)
        return store.append_context(sid, ["mine"], expected_version=2)

    store.client.meta.events.register("before-send.dynamodb.UpdateItem", rival_first)
    try:
        with RequestLog(store.client) as log, pytest.raises(ss.VersionConflict) as caught:
            ours()
    finally:
        store.client.meta.events.unregister("before-send.dynamodb.UpdateItem", rival_first)
    now = store.get_session(sid)
    if operation == "update_status":
        assert isinstance(caught.value, ss.ConflictRetriesExhausted)
        assert caught.value.attempts == 3
        assert caught.value.expected < caught.value.current.version
        assert log.counts() == {"UpdateItem": 3}  # the current item came from ALL_OLD
        assert now.status is ss.Status.ACTIVE
    else:  # the caller asked for version 2: no retry
        assert not isinstance(caught.value, ss.ConflictRetriesExhausted)
        assert log.counts() == {"UpdateItem": 1}  # refused: no page written
        assert "mine" not in list(store.context(sid))
    assert caught.value.current.version == now.version


def test_append_without_expected_version_is_not_refused_by_rival_writes(
    engine: Any, table: str, clock: ss.ManualClock
) -> None:
    """Issue 12: the rival's writes before our attempt no longer refuse it."""
    store = _store(engine, table, clock, attempts=3)
    sid = store.activate(store.create_session().session_id).session_id
    rival = ss.SessionStore(ss.connect(engine.endpoint_url), table, clock=clock)

    def rival_first(**_: Any) -> None:
        rival.append_context(sid, ["rival"])
        rival.update_attributes(sid, {"rival": True})

    events = ("before-send.dynamodb.UpdateItem", "before-send.dynamodb.TransactWriteItems")
    for event in events:
        store.client.meta.events.register(event, rival_first)
    try:
        with RequestLog(store.client) as log:
            appended = store.append_context(sid, ["mine"])
            store.update_attributes(sid, {"mine": 1})
    finally:
        for event in events:
            store.client.meta.events.unregister(event, rival_first)
    # One attempt each: an append is its reservation and its page (and, as the rival changed
    # the attributes, one read of them for the session it returns); the attributes change one
    # transaction, which reads nothing back.
    assert log.counts() == {"UpdateItem": 1, "PutItem": 1, "GetItem": 1, "TransactWriteItems": 1}
    updated = store.get_session(sid)
    assert appended.attributes == {"rival": True}
    assert appended.message_count == 2
    assert list(store.context(sid)) == ["rival", "mine", "rival"]  # one more before update
    assert dict(updated.attributes) == {"rival": True, "mine": 1}
    assert updated.version == 2 + 4 + 2  # before each of ours, two rival writes; one each


# ------------------------------------------------ 2. a version hint that outlived its session


def _reincarnate(store: Any, client: Any, table: str, clock: ss.ManualClock, sid: str) -> None:
    """Session ``sid`` lives, grows, expires, is swept by TTL and is created again."""
    store.activate(store.create_session(sid, ttl_seconds=60).session_id)
    for _ in range(6):
        store.append_context(sid, ["x" * 1_000])
    clock.advance(seconds=120)
    _sweep(client, table, *(i["sk"]["S"] for i in scan(client, table)), sid=sid)


def test_version_hint_outlives_its_session_same_instance(
    engine: Any, client: Any, table: str, clock: ss.ManualClock
) -> None:
    limit = 3_000  # context bytes: the old context (6 x 1,002 B) would not fit; the new is empty
    store = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds())
    _reincarnate(store, client, table, clock, "reused")  # the hint: 6 messages, 6,012 B
    store.limits = dataclasses.replace(store.limits, max_bytes=limit)
    new = store.activate(store.create_session("reused", ttl_seconds=3_600).session_id)
    with RequestLog(client) as log:
        appended = store.append_context("reused", ["hello"])
        rec = store.record_tool_call("reused", "c1", "t", {}, 1, 0)
    # no conflict, no refusal: the append's two writes and the record's one
    assert log.counts() == {"UpdateItem": 1, "PutItem": 1, "TransactWriteItems": 1}
    assert appended.version == new.version + 1 and appended.message_count == 1
    assert list(store.context("reused")) == ["hello"]
    assert rec.ttl == new.ttl  # not the old incarnation's ttl, already past


def test_version_hint_outlives_its_session_other_instance_recreates(
    engine: Any, client: Any, table: str, clock: ss.ManualClock
) -> None:
    store = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds())
    _reincarnate(store, client, table, clock, "reused")
    other = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds("o"))
    new = other.activate(other.create_session("reused", ttl_seconds=3_600).session_id)
    rec = store.record_tool_call("reused", "c1", "t", {}, 1, 0)
    assert rec.ttl == new.ttl
    items = {i["sk"]["S"]: int(i["ttl"]["N"]) for i in scan(client, table)}
    assert set(items.values()) == {new.ttl}  # the call expires with the new session
    with RequestLog(client) as log:
        store.append_context("reused", ["a"])
        store.append_context("reused", ["b"])
    # the hint follows the new incarnation: no read, no refusal
    assert log.counts() == {"UpdateItem": 2, "PutItem": 2}
    assert list(store.context("reused")) == ["a", "b"]  # not the old incarnation's messages


def test_record_ttl_from_a_stale_hint_is_corrected_by_the_condition(
    client: Any, table: str, clock: ss.ManualClock
) -> None:
    """A hint whose ttl has not passed but whose session was replaced (deleted by hand and
    re-created): the ConditionCheck compares ttl, so the record still gets the session's."""
    store = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds())
    store.activate(store.create_session("s", ttl_seconds=600).session_id)
    _sweep(client, table, schema.META_SK, sid="s")
    other = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds("o"))
    new = other.activate(other.create_session("s", ttl_seconds=9_000).session_id)
    with RequestLog(client) as log:
        rec = store.record_tool_call("s", "c1", "t", {}, 1, 0)
    assert log.counts() == {"TransactWriteItems": 2}
    assert rec.ttl == new.ttl


# ------------------------------------------------ 3. TTL deletes items one at a time


def test_a_call_swept_by_ttl_records_again(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str, clock: ss.ManualClock
) -> None:
    sid = active.session_id
    first = store.record_tool_call(
        sid, "c1", "t", {"q": 1}, "old", 5, owner="alice", ttl_seconds=60
    )
    clock.advance(seconds=120)
    _sweep(client, table, schema.tool_sk("c1"), sid=sid)
    again = store.record_tool_call(sid, "c1", "t", {"q": 1}, "new", 7, owner="alice")
    assert again.output == "new" and again.recorded_at > first.recorded_at
    assert [r.output for r in store.tool_calls(sid, owner="alice")] == ["new"]


def test_an_expired_call_still_present_records_again_and_hides_the_old_one(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str, clock: ss.ManualClock
) -> None:
    sid = active.session_id
    store.record_tool_call(sid, "c1", "t", {}, "old", 5, owner="alice", ttl_seconds=60)
    clock.advance(seconds=120)  # nothing swept yet
    again = store.record_tool_call(sid, "c1", "t", {}, "new", 7, owner="alice")
    assert again.output == "new"
    _, _, history = store.load(sid, owner="alice")
    assert [r.output for r in history] == ["new"]


def test_an_id_claimed_but_not_recorded_is_a_conflict_and_writes_nothing(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    sid = active.session_id
    claims.claim(store.table, sid, "c1", "t", {}, owner="alice", ttl=active.ttl, lease_ms=60_000)
    before = scan(client, table)
    with pytest.raises(ss.ToolCallConflict) as caught:
        store.record_tool_call(sid, "c1", "t", {}, 1, 5, owner="alice")
    assert caught.value.stored is None and caught.value.tool_call_id == "c1"
    assert scan(client, table) == before  # not recorded: the claim's holder may be running it
    assert list(store.tool_calls(sid, owner="alice")) == []  # a claim is not history


def test_expired_records_are_invisible_on_read(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock
) -> None:
    sid = active.session_id
    store.record_tool_call(sid, "short", "t", {}, 1, 0, owner="alice", ttl_seconds=60)
    clock.advance(ms=1)
    store.record_tool_call(sid, "long", "t", {}, 1, 0, owner="alice")
    assert [r.tool_call_id for r in store.tool_calls(sid, owner="alice")] == ["short", "long"]
    clock.advance(
        seconds=60, ms=-1
    )  # ttl == now: expired (DynamoDB deletes items whose ttl passed)
    assert [r.tool_call_id for r in store.tool_calls(sid, owner="alice")] == ["long"]
    _, _, history = store.load(sid, owner="alice")
    assert [r.tool_call_id for r in history] == ["long"]


# ------------------------------------------------ 4 and 5. real DynamoDB's transaction errors


def test_transaction_cancelled_by_throttling_is_retried(
    engine: Any, table: str, clock: ss.ManualClock
) -> None:
    store = _store(engine, table, clock, attempts=3)
    sid = store.activate(store.create_session().session_id).session_id
    with (
        FaultInjector(store.client, script=[Fault.TRANSACTION_THROTTLED]) as faults,
        RequestLog(store.client) as log,
    ):
        rec = store.record_tool_call(sid, "c1", "t", {}, 1, 0)
    assert faults.injected[Fault.TRANSACTION_THROTTLED] == 1
    assert log.counts() == {"TransactWriteItems": 2}
    assert [r for r in store.tool_calls(sid)] == [rec]


@pytest.mark.parametrize("fault", [Fault.TRANSACTION_THROTTLED, Fault.TRANSACTION_CONFLICT])
def test_transaction_cancelled_on_every_attempt_is_unavailable_and_writes_nothing(
    engine: Any, table: str, clock: ss.ManualClock, fault: Fault
) -> None:
    store = _store(engine, table, clock, attempts=3)
    sid = store.activate(store.create_session().session_id).session_id
    before = scan(store.client, table)
    with FaultInjector(store.client, script=[fault] * 3), pytest.raises(ss.Unavailable) as caught:
        store.record_tool_call(sid, "c1", "t", {}, 1, 0)
    assert not caught.value.maybe_applied  # provably refused every time: safe to call again
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    assert "3 attempts" in str(caught.value)
    assert scan(store.client, table) == before


@pytest.mark.parametrize("operation", ["create", "activate", "append", "update_status"])
def test_transaction_conflict_exception_is_retried(
    engine: Any, table: str, clock: ss.ManualClock, operation: str
) -> None:
    store = _store(engine, table, clock, attempts=3)
    sid = store.create_session().session_id
    if operation in ("append",):
        store.activate(sid)
    calls = {
        "create": lambda: store.create_session("other"),
        "activate": lambda: store.activate(sid),
        "append": lambda: store.append_context(sid, ["m"]),
        "update_status": lambda: store.update_status(sid, ss.Status.CLOSING),
    }
    with FaultInjector(store.client, script=[Fault.TRANSACTION_CONFLICT]) as faults:
        result = calls[operation]()
    assert faults.injected[Fault.TRANSACTION_CONFLICT] == 1
    assert store.get_session(result.session_id) == result


def test_transaction_conflict_on_every_attempt_is_unavailable_and_writes_nothing(
    engine: Any, table: str, clock: ss.ManualClock
) -> None:
    store = _store(engine, table, clock, attempts=4)
    sid = store.activate(store.create_session().session_id).session_id
    before = _meta(store.client, table, sid)
    with (
        FaultInjector(store.client, script=[Fault.TRANSACTION_CONFLICT] * 4),
        pytest.raises(ss.Unavailable) as caught,
    ):
        store.append_context(sid, ["m"])
    assert not caught.value.maybe_applied
    assert "TransactionConflictException" in str(caught.value)
    assert _meta(store.client, table, sid) == before


# ------------------------------------------------ 6. the widest metadata item


class _LongTokens(ss.CounterIds):
    def token(self) -> str:
        return super().token().rjust(64, "T")


def test_widest_metadata_item_stays_within_the_limit(
    client: Any, table: str, clock: ss.ManualClock
) -> None:
    """The reserve used to be computed with 10**20 (2 bytes as a DynamoDB number) and 32-char
    tokens; a 64-character token factory then stored a 20,351 B item under a 20,000 B limit.
    Now also: the attributes at their limit and a full token map of 64-character tokens (named
    by 22-character digests). With context pages the metadata item holds no messages, so
    everything it can hold -- widest version, ttl, message and byte counters, ids, tokens --
    must fit ``METADATA_OVERHEAD`` itself, the bound every write to it is billed by, up to the
    moment the context is full."""
    sid, owner = "s" * 128, "o" * 128
    count, context_bytes = 987_654_321_000, 987_654_321_098_765  # 12 and 15 digits
    room = TOKEN_CAP + 40  # messages left before the context is full

    def store(prefix: str = "") -> ss.SessionStore:  # a new instance: no hint of the numbers
        return ss.SessionStore(
            client,
            table,
            clock=clock,
            ids=_LongTokens(prefix),
            max_context_messages=count + room,
            max_context_bytes=context_bytes + 10**6,
        )

    store("c").create_session(sid, owner=owner, ttl_seconds=316_224_000)
    # A long-lived session: version, ttl and context counters with many significant digits.
    client.update_item(
        TableName=table,
        Key=schema.meta_key(sid),
        UpdateExpression="SET version = :v, #t = :t, messageCount = :n, contextBytes = :b",
        ExpressionAttributeNames={"#t": "ttl"},
        ExpressionAttributeValues={
            ":v": {"N": "98765432109876543210"},
            ":t": {"N": "9876543219"},
            ":n": {"N": str(count)},
            ":b": {"N": str(context_bytes)},
        },
    )
    writer = store("w")
    version = writer.activate(sid, owner=owner).version
    # attributes up to their limit: 3 + 16 x (4 + 250 + 1) = 4,083 B
    writer.update_attributes(
        sid, {f"a{i:03d}": "v" * 248 for i in range(16)}, owner=owner, expected_version=version
    )
    filled = writer.get_session(sid, owner=owner)
    assert filled.attribute_bytes == 4_083 <= ATTRIBUTES_MAX_BYTES
    # a full token map: instances that append once and never come back
    one_shot = TOKEN_CAP - len(_meta(client, table, sid)["tk"])
    for i in range(one_shot):
        store(f"{i:02d}").append_context(sid, [f"{i:03d}" + "m" * 600], owner=owner)
    assert len(_meta(client, table, sid)["tk"]) == TOKEN_CAP
    version = writer.get_session(sid, owner=owner).version
    for n in range(100):  # pinned appends fill the context; each removes the writer's last token
        try:
            version = writer.append_context(
                sid, [f"{n:03d}" + "m" * 600], owner=owner, expected_version=version
            ).version
        except ss.ContextFull as full:
            assert (full.messages, full.max_messages) == (count + room, count + room)
            break
    else:
        pytest.fail("the context never filled up")
    assert n == room - one_shot
    writer.begin_close(sid, owner=owner)  # two more writes after the context is full
    writer.close(sid, owner=owner)
    raw = client.get_item(TableName=table, Key=schema.meta_key(sid), ConsistentRead=True)["Item"]
    assert raw["messageCount"] == {"N": str(count + room)}
    assert len(raw["tk"]["M"]) == TOKEN_CAP
    assert sizing.item_size(raw) <= ss.METADATA_OVERHEAD
    # and the reserve is not wildly generous
    assert ss.METADATA_OVERHEAD - sizing.item_size(raw) < 1_000


@pytest.mark.parametrize("token", ["T" * 65, "", "has space", 7])
def test_token_length_is_validated(
    client: Any, table: str, clock: ss.ManualClock, token: Any, requests: RequestLog
) -> None:
    class Bad(ss.CounterIds):
        def token(self) -> Any:
            return token

    store = ss.SessionStore(client, table, clock=clock, ids=Bad())
    with pytest.raises(ss.InvalidInput, match="token"):
        store.create_session("s")
    assert requests.count == 0


# ------------------------------------------------ 8. smaller ones


def test_session_and_record_are_hashable(store: ss.SessionStore, active: ss.Session) -> None:
    appended = store.append_context(active.session_id, [{"role": "user"}], owner="alice")
    rec = store.record_tool_call(active.session_id, "c", "t", {"a": 1}, {"b": 2}, 0, owner="alice")
    again = store.get_session(active.session_id, owner="alice")
    assert appended == again and hash(appended) == hash(again)
    assert len({appended, again, active}) == 2
    assert {
        rec,
        store.record_tool_call(active.session_id, "c", "t", {"a": 1}, 0, 0, owner="alice"),
    } == {rec}


def test_context_equality_is_by_value() -> None:
    ctx = ss.Context(['{"a":1}', "2"])
    assert ctx == ({"a": 1}, 2) and ctx == [{"a": 1}, 2]
    assert ss.Context() == [] and ss.Context() == ()
    assert ctx != [{"a": 1}] and ctx != ["x", 2]
    assert ss.Context(['{"a":1,"b":2}']) == ss.Context(['{"b":2,"a":1}'])
    with pytest.raises(TypeError):
        hash(ctx)  # like a list: its messages are usually dicts


def test_ambiguity_mark_is_per_request_not_per_thread(
    engine: Any, table: str, clock: ss.ManualClock
) -> None:
    """botocore retries a lost attempt; while it does, another request is sent from the same
    thread (a hook here; an event loop's callbacks in an async server). A thread-local flag was
    reset by that other request, so the retried write forgot it may have landed."""
    client = ss.connect(engine.endpoint_url, max_attempts=2)
    store = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds())
    sid = store.activate(store.create_session().session_id).session_id
    seen = store.get_session(sid)
    sends = []

    def other_request_in_between(**_: Any) -> None:
        sends.append(1)
        if len(sends) == 2:  # the retry of the lost attempt
            store.get_session(sid)

    client.meta.events.register("before-send.dynamodb.UpdateItem", other_request_in_between)
    request = {
        "TableName": table,
        "Key": schema.meta_key(sid),
        "UpdateExpression": "SET version = :n",
        "ConditionExpression": "version = :v",
        "ExpressionAttributeValues": {":v": {"N": str(seen.version)}, ":n": {"N": "99"}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    with (
        FaultInjector(client, script=[Fault.LOST_RESPONSE], operations=["UpdateItem"]),
        pytest.raises(wire.ConditionFailed) as caught,
    ):
        wire.send(client, "update_item", request, table, 400_000)
    assert len(sends) == 2
    assert caught.value.ambiguous  # the lost first attempt is remembered for this request


def test_watch_attempt_marks_only_its_own_request() -> None:
    first, second = wire._Attempt(), wire._Attempt()
    wire.watch_attempt(
        caught_exception=ReadTimeoutError(endpoint_url="http://127.0.0.1"),
        request_dict={"context": {"sessionstore.attempt": first}},
    )

    class Refused:
        status_code = 400  # DynamoDB's own error: nothing written

    wire.watch_attempt(
        response=(Refused(), {}), request_dict={"context": {"sessionstore.attempt": second}}
    )
    assert (first.ambiguous, second.ambiguous) == (True, False)


# ------------------------------------------------ found by review: more ways to land unseen


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_a: Any, **_k: Any) -> Any:
        yield self._body


def _error(request: Any, code: str, **fields: Any) -> Any:
    from botocore.awsrequest import AWSResponse

    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", **fields}).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0"}
    return AWSResponse(request.url, 400, headers, _Raw(body))


def _after_a_reservation_without_its_page(
    store: Any, sid: str, caught: Any, clock: ss.ManualClock
) -> None:
    """An append whose reservation (UpdateItem) may have landed but whose page was never sent:
    the messages were not stored, so the caller is told ``maybe_applied=False`` and retrying
    stores them once -- visible after the hole's in-flight window has passed."""
    assert not caught.value.maybe_applied
    assert list(store.context(sid)) == []
    assert store.get_session(sid).message_count == 1  # the reservation landed: a hole
    store.append_context(sid, ["mine"])  # what a caller does on maybe_applied=False
    clock.advance(seconds=IN_FLIGHT_S + 1)
    assert list(store.context(sid)) == ["mine"]


@pytest.mark.parametrize("operation", ["PutItem", "UpdateItem"])
def test_ssl_error_after_the_write_landed_is_maybe_applied(
    engine: Any, table: str, clock: ss.ManualClock, operation: str
) -> None:
    """PutItem: the page landed, so the append may have been applied. UpdateItem: only the
    reservation landed, the page was never sent: not applied (a caller retrying on it used to
    append twice)."""
    from botocore.exceptions import SSLError
    from botocore.httpsession import URLLib3Session

    store = _store(engine, table, clock, attempts=1)
    sid = store.activate(store.create_session().session_id).session_id
    http = URLLib3Session()

    def applied_then_ssl(request: Any, **_: Any) -> None:
        http.send(request)  # the engine applies it...
        raise SSLError(endpoint_url=request.url, error="EOF occurred in violation of protocol")

    store.client.meta.events.register(f"before-send.dynamodb.{operation}", applied_then_ssl)
    with pytest.raises(ss.Unavailable) as caught:
        store.append_context(sid, ["mine"])
    store.client.meta.events.unregister(f"before-send.dynamodb.{operation}", applied_then_ssl)
    if operation == "UpdateItem":
        _after_a_reservation_without_its_page(store, sid, caught, clock)
    else:
        assert caught.value.maybe_applied  # was False: a caller retrying on it appended twice
        assert list(store.context(sid)) == ["mine"]


@pytest.mark.parametrize("operation", ["PutItem", "UpdateItem"])
def test_a_2xx_retried_for_its_checksum_then_throttled_is_maybe_applied(
    engine: Any, table: str, clock: ss.ManualClock, operation: str
) -> None:
    from botocore.awsrequest import AWSResponse
    from botocore.httpsession import URLLib3Session

    client = ss.connect(engine.endpoint_url, max_attempts=2)
    retry = RetryPolicy(max_attempts=1, sleep=lambda _s: None)
    store = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds(), retry=retry)
    sid = store.activate(store.create_session().session_id).session_id
    http, sends = URLLib3Session(), []

    def bad_crc_then_throttle(request: Any, **_: Any) -> Any:
        sends.append(1)
        if len(sends) == 1:
            answer = http.send(request)  # applied; the answer's CRC32 does not match
            headers = {**dict(answer.headers), "x-amz-crc32": "1"}
            return AWSResponse(request.url, 200, headers, _Raw(answer.content))
        return _error(request, "ThrottlingException", message="slow down")

    client.meta.events.register(f"before-send.dynamodb.{operation}", bad_crc_then_throttle)
    with pytest.raises(ss.Unavailable) as caught:
        store.append_context(sid, ["mine"])
    client.meta.events.unregister(f"before-send.dynamodb.{operation}", bad_crc_then_throttle)
    assert len(sends) == 2
    if operation == "UpdateItem":
        _after_a_reservation_without_its_page(store, sid, caught, clock)
    else:
        assert caught.value.maybe_applied
        assert list(store.context(sid)) == ["mine"]


def test_never_sent_and_refused_attempts_are_not_maybe_applied() -> None:
    from botocore.exceptions import EndpointConnectionError

    never, refused = wire._Attempt(), wire._Attempt()
    wire.watch_attempt(
        caught_exception=EndpointConnectionError(endpoint_url="http://127.0.0.1"),
        request_dict={"context": {"sessionstore.attempt": never}},
    )

    class Http:
        status_code = 400

    wire.watch_attempt(
        response=(Http(), {}), request_dict={"context": {"sessionstore.attempt": refused}}
    )
    assert (never.ambiguous, refused.ambiguous) == (False, False)


def test_mixed_cancellation_reasons_are_contention_not_a_refusal(
    engine: Any, table: str, clock: ss.ManualClock
) -> None:
    """Our record landed (answer lost), then the session began closing; the resend is cancelled
    with [ConditionalCheckFailed(meta), TransactionConflict(call item)]. The call item's condition
    was never evaluated, so 'not active' cannot be the answer: the retry finds the recorded call."""
    store = _store(engine, table, clock, attempts=3)
    sid = store.activate(store.create_session().session_id).session_id
    rival = ss.SessionStore(ss.connect(engine.endpoint_url), table, clock=clock)
    from botocore.httpsession import URLLib3Session

    http, sends = URLLib3Session(), []

    def landed_then_mixed(request: Any, **_: Any) -> Any:
        sends.append(1)
        if len(sends) == 1:
            http.send(request)
            rival.begin_close(sid)
            raise ReadTimeoutError(endpoint_url=request.url)
        if len(sends) == 2:
            meta = rival.client.get_item(TableName=table, Key=schema.meta_key(sid))["Item"]
            reasons = [
                {"Code": "ConditionalCheckFailed", "Message": "failed", "Item": meta},
                {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
            ]
            return _error(
                request,
                "TransactionCanceledException",
                Message="cancelled",
                CancellationReasons=reasons,
            )
        return None

    store.client.meta.events.register("before-send.dynamodb.TransactWriteItems", landed_then_mixed)
    rec = store.record_tool_call(sid, "c1", "t", {}, 1, 0)  # was: SessionNotActive
    assert len(sends) == 3 and rec.tool_call_id == "c1"
    assert [r.tool_call_id for r in store.tool_calls(sid)] == ["c1"]


def test_record_landed_and_expired_before_the_resend(
    engine: Any, table: str, clock: ss.ManualClock
) -> None:
    """ttl_seconds=1: the first attempt lands, its answer is lost, and by the resend the record
    has expired (TTL has not removed it): the resend may put it again, and there is still one
    item under the id."""
    store = _store(engine, table, clock, attempts=3)
    sid = store.activate(store.create_session().session_id).session_id

    def lost_and_a_second_passes(operation: str) -> None:
        clock.advance(seconds=2)

    with FaultInjector(
        store.client, script=[Fault.LOST_RESPONSE], after_lost=lost_and_a_second_passes
    ):
        rec = store.record_tool_call(sid, "c1", "t", {}, 1, 0, ttl_seconds=1)  # was DynamoDBError
    assert rec.tool_call_id == "c1"
    items = [i["sk"]["S"] for i in scan(store.client, table) if i["sk"]["S"].startswith("tool#")]
    assert len(items) == 1


@pytest.mark.parametrize("write", ["append: page", "update_attributes", "append: reservation"])
def test_unexplained_error_after_a_possible_landing_is_maybe_applied(
    engine: Any, table: str, clock: ss.ManualClock, write: str
) -> None:
    store = _store(engine, table, clock, attempts=3)
    sid = store.activate(store.create_session().session_id).session_id
    sends: list[int] = []

    def lost_then_validation(request: Any, **_: Any) -> Any:
        sends.append(1)
        if len(sends) == 1:
            raise ReadTimeoutError(endpoint_url=request.url)  # (not applied, but unknowable)
        return _error(request, "ValidationException", message="something else entirely")

    operation = {"append: page": "PutItem", "update_attributes": "TransactWriteItems"}.get(
        write, "UpdateItem"
    )
    store.client.meta.events.register(f"before-send.dynamodb.{operation}", lost_then_validation)
    with pytest.raises(ss.Unavailable) as caught:
        if write == "update_attributes":
            store.update_attributes(sid, {"m": 1})
        else:
            store.append_context(sid, ["m"])
    if write == "append: reservation":  # the page was never sent: the messages were not stored
        assert not caught.value.maybe_applied
        assert list(store.context(sid)) == []
    else:
        assert caught.value.maybe_applied and isinstance(caught.value.__cause__, ss.DynamoDBError)


def test_a_record_never_outlives_its_session(
    client: Any, table: str, clock: ss.ManualClock
) -> None:
    """Review: a record with a longer ttl_seconds outlived its session, and a new session under
    the same id (another owner's) listed it. Now the record is cut to the session's ttl."""
    store = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds())
    session = store.activate(
        store.create_session("s", owner="alice", ttl_seconds=60).session_id, owner="alice"
    )
    with RequestLog(client) as log:
        rec = store.record_tool_call("s", "c1", "t", {}, 1, 0, owner="alice", ttl_seconds=3_600)
    assert log.counts() == {"TransactWriteItems": 2}
    assert rec.ttl == session.ttl
    assert {int(i["ttl"]["N"]) for i in scan(client, table)} == {session.ttl}
    clock.advance(seconds=61)
    _sweep(client, table, *(i["sk"]["S"] for i in scan(client, table)), sid="s")
    bob = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds("b"))
    bob.activate(bob.create_session("s", owner="bob").session_id, owner="bob")
    assert list(bob.tool_calls("s", owner="bob")) == []


def test_cold_instance_record_ttl_is_checked(
    client: Any, table: str, clock: ss.ManualClock
) -> None:
    store = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds())
    store.activate(store.create_session("s", ttl_seconds=600).session_id)
    cold = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds("c"))
    replaced: list[int] = []

    def replace_session_after_the_read(**_: Any) -> None:
        if not replaced:  # between the cold read and the transaction
            replaced.append(1)
            _sweep(client, table, schema.META_SK, sid="s")
            other = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds("o"))
            replaced.append(
                other.activate(other.create_session("s", ttl_seconds=9_000).session_id).ttl
            )

    client.meta.events.register(
        "before-send.dynamodb.TransactWriteItems", replace_session_after_the_read
    )
    try:
        rec = cold.record_tool_call("s", "c1", "t", {}, 1, 0)
    finally:
        client.meta.events.unregister(
            "before-send.dynamodb.TransactWriteItems", replace_session_after_the_read
        )
    assert rec.ttl == replaced[1]


@pytest.mark.parametrize("attempts", [0, -1, 1.5, True])
def test_retry_policy_refuses_fewer_than_one_attempt(attempts: Any) -> None:
    with pytest.raises(ss.InvalidInput):
        RetryPolicy(max_attempts=attempts)


# ------------------------------------------------ context pages: a reservation readers must see


def test_a_pinned_appends_hole_in_flight_is_waited_for_not_skipped(
    client: Any, table: str, clock: ss.ManualClock
) -> None:
    """An append pinned to a version (``expected_version``): while its page is in flight,
    another append lands after it: a reader must stop before the hole (what it shows is a prefix
    of the context, and reading on from its position misses nothing), not skip it."""
    sid = "s"
    ss.SessionStore(client, table, clock=clock).activate(
        ss.SessionStore(client, table, clock=clock).create_session(sid).session_id
    )
    writer = ss.SessionStore(ss.connect(client.meta.endpoint_url), table, clock=clock)
    rival = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds("r"))
    seen: list[list[Any]] = []

    def rival_lands_and_a_reader_reads(**_: Any) -> None:  # before the writer's page is sent
        if not seen:
            rival.append_context(sid, ["second"])
            reader = rival.context(sid)
            seen.append(list(reader))
            seen.append([reader.position])

    writer.client.meta.events.register(
        "before-send.dynamodb.PutItem", rival_lands_and_a_reader_reads
    )
    version = writer.get_session(sid).version
    writer.append_context(sid, ["first"], expected_version=version)
    assert list(rival.context(sid)) == ["first", "second"]
    shown, (position,) = seen
    assert shown == [] and position is None  # stopped before the hole of "first"
