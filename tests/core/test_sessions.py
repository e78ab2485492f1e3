"""Sessions: create, read, lifecycle, optimistic locking -- with request counts."""

from __future__ import annotations

from typing import Any

import pytest

import sessionstore as ss
from sessionstore.retry import RetryPolicy
from sessionstore.testing import Fault, FaultInjector, RequestLog
from sessionstore.tutorial import source_design
from tests.conftest import scan

S = ss.Status


def test_create_table_is_idempotent_on_demand_with_ttl(client: Any) -> None:
    store = ss.SessionStore(client, "bootstrap")
    assert store.create_table() is True
    assert store.create_table() is False
    table = client.describe_table(TableName="bootstrap")["Table"]
    assert table["TableStatus"] == "ACTIVE"
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]} == {
        "pk": "HASH",
        "sk": "RANGE",
    }
    ttl = client.describe_time_to_live(TableName="bootstrap")["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "ttl"}


def test_create_session_one_request(store: ss.SessionStore, requests: RequestLog) -> None:
    session = store.create_session(owner="alice", ttl_seconds=3600)
    assert requests.counts() == {"PutItem": 1}
    assert session.session_id == "s-0001"
    assert session.version == 1
    assert session.status is S.INITIALIZING
    assert session.created_at == session.updated_at == "2026-01-01T12:00:00.000Z"
    assert session.ttl == 1_767_268_800 + 3600  # epoch seconds
    assert (session.message_count, session.context_bytes) == (0, 0)
    requests.reset()
    assert list(store.context(session.session_id, owner="alice")) == []
    assert requests.counts() == {"Query": 1}


def test_generated_ids_carry_128_bits_from_the_csprng(client: Any, table: str) -> None:
    store = ss.SessionStore(client, table)
    ids = {store.create_session().session_id for _ in range(20)}
    assert len(ids) == 20
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)  # 32 hex digits = 128 bits


@pytest.mark.parametrize(
    "bad", ["", "x" * 129, "has space", "tab\there", "caf\u00e9", "new\nline", "\x7f", 42]
)
def test_invalid_session_ids_are_refused_before_sending(
    store: ss.SessionStore, requests: RequestLog, client: Any, table: str, bad: Any
) -> None:
    with pytest.raises(ss.InvalidInput):
        store.create_session(bad)
    assert requests.count == 0
    assert scan(client, table) == []


def test_id_limits_are_inclusive(store: ss.SessionStore) -> None:
    assert store.create_session("x" * 128).session_id == "x" * 128
    assert store.create_session("!#~").session_id == "!#~"


@pytest.mark.parametrize("ttl", [0, -1, 10**12, 1.5, True, "60"])
def test_invalid_ttl_is_refused(store: ss.SessionStore, ttl: Any) -> None:
    with pytest.raises(ss.InvalidInput):
        store.create_session(ttl_seconds=ttl)


def test_duplicate_id_is_refused(store: ss.SessionStore) -> None:
    store.create_session("dup")
    with pytest.raises(ss.SessionAlreadyExists):
        store.create_session("dup")


def test_create_survives_a_lost_response(
    store: ss.SessionStore, client: Any, table: str, requests: RequestLog
) -> None:
    with FaultInjector(client, script=[Fault.LOST_RESPONSE]) as faults:
        session = store.create_session("lost")
    assert faults.injected[Fault.LOST_RESPONSE] == 1
    assert requests.counts() == {"PutItem": 2}  # botocore retried; ours saw its own token
    assert session.version == 1
    assert len(scan(client, table)) == 1


def test_get_session_is_consistent_and_one_request(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog, client: Any
) -> None:
    seen: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.dynamodb.GetItem", lambda params, **_: seen.append(params)
    )
    assert store.get_session(active.session_id, owner="alice") == active
    assert requests.count == 1
    assert seen[0]["ConsistentRead"] is True


def test_missing_and_foreign_sessions_look_identical(
    store: ss.SessionStore, active: ss.Session
) -> None:
    with pytest.raises(ss.SessionNotFound) as missing:
        store.get_session("nope-0001")
    store.create_session("nope-0002", owner="alice")
    with pytest.raises(ss.SessionNotFound) as foreign:
        store.get_session("nope-0002", owner="bob")
    with pytest.raises(ss.SessionNotFound) as anonymous:
        store.get_session("nope-0002")  # owner=None never bypasses the owner check
    assert str(missing.value).replace("0001", "X") == str(foreign.value).replace("0002", "X")
    assert type(foreign.value) is type(anonymous.value) is ss.SessionNotFound


def test_expired_but_undeleted_session_is_refused(
    store: ss.SessionStore, clock: ss.ManualClock, client: Any, table: str
) -> None:
    session = store.create_session(owner="alice", ttl_seconds=60)
    store.activate(session.session_id, owner="alice")
    clock.advance(seconds=60)
    assert len(scan(client, table)) == 1  # TTL deletion is lazy: the item is still there
    with pytest.raises(ss.SessionExpired):
        store.get_session(session.session_id, owner="alice")
    for write in (store.begin_close, store.activate):
        with pytest.raises(ss.SessionExpired):
            write(session.session_id, owner="alice")
    with pytest.raises(ss.SessionExpired):
        store.update_status(session.session_id, S.CLOSING, owner="alice")


def test_every_allowed_transition_is_one_request(
    store: ss.SessionStore, requests: RequestLog
) -> None:
    sid = store.create_session().session_id
    versions = []
    for step in (store.activate, store.begin_close, store.close):
        requests.reset()
        versions.append(step(sid).version)
        assert requests.counts() == {"UpdateItem": 1}
    assert versions == [2, 3, 4]


def test_transition_table_is_enforced(store: ss.SessionStore) -> None:
    for current in S:
        for target in S:
            sid = store.create_session().session_id
            path = {
                S.INITIALIZING: [],
                S.ACTIVE: [S.ACTIVE],
                S.CLOSING: [S.ACTIVE, S.CLOSING],
                S.CLOSED: [S.ACTIVE, S.CLOSING, S.CLOSED],
            }[current]
            for step in path:
                store.transition(sid, step)
            if target is current or target in ss.TRANSITIONS[current]:
                assert store.transition(sid, target).status is target
            else:
                with pytest.raises(ss.InvalidTransition) as err:
                    store.transition(sid, target)
                assert err.value.current is current and err.value.requested is target


def test_reasking_the_current_state_is_a_no_op(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    closing = store.begin_close(active.session_id, owner="alice")
    requests.reset()
    again = store.begin_close(active.session_id, owner="alice")
    assert again == closing  # same version: nothing was written
    assert requests.count == 1


def test_transition_failures_are_classified_without_a_second_read(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog, clock: ss.ManualClock
) -> None:
    cases = [
        (lambda: store.begin_close("missing"), ss.SessionNotFound),
        (lambda: store.begin_close(active.session_id, owner="bob"), ss.SessionNotFound),
        (lambda: store.activate(active.session_id, owner="alice"), None),
        (
            lambda: store.transition(active.session_id, S.CLOSED, owner="alice"),
            ss.InvalidTransition,
        ),
    ]
    for call, error in cases:
        requests.reset()
        if error is None:
            call()
        else:
            with pytest.raises(error):
                call()
        assert requests.count == 1
    clock.advance(seconds=86400)
    requests.reset()
    with pytest.raises(ss.SessionExpired):
        store.begin_close(active.session_id, owner="alice")
    assert requests.count == 1


def test_source_design_swallows_not_found_ours_does_not(
    store: ss.SessionStore, client: Any, table: str
) -> None:
    # The source's beginSessionClose "succeeds" on a session that does not exist...
    assert source_design.begin_session_close(client, "ghost", table=table) is None
    # ...ours says so, in the same single request.
    with pytest.raises(ss.SessionNotFound):
        store.begin_close("ghost")


def test_transition_survives_a_lost_response(
    store: ss.SessionStore, active: ss.Session, client: Any, requests: RequestLog
) -> None:
    with FaultInjector(client, script=[Fault.LOST_RESPONSE]):
        closing = store.begin_close(active.session_id, owner="alice")
    assert closing.status is S.CLOSING
    assert closing.version == active.version + 1  # applied once
    assert requests.counts() == {"UpdateItem": 2}


def test_update_status_uncontended_is_one_request(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    updated = store.update_status(active.session_id, S.CLOSING, owner="alice")
    assert requests.counts() == {"UpdateItem": 1}
    assert updated.version == active.version + 1 and updated.status is S.CLOSING


def test_update_status_from_a_cold_instance_reads_once(
    client: Any, table: str, clock: ss.ManualClock, active: ss.Session, requests: RequestLog
) -> None:
    cold = ss.SessionStore(client, table, clock=clock)
    cold.update_status(active.session_id, S.CLOSING, owner="alice")
    assert requests.counts() == {"GetItem": 1, "UpdateItem": 1}


def test_each_conflict_retry_is_one_request(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore, requests: RequestLog
) -> None:
    sid = store.create_session().session_id
    other = ss.SessionStore(client, table, clock=clock)
    other.activate(sid)  # store's cached version (1) is now stale
    other.update_status(sid, S.ACTIVE)  # no-op
    requests.reset()
    result = store.update_status(sid, S.CLOSING)
    assert requests.counts() == {"UpdateItem": 2}  # the conflict, then the retry: no re-read
    assert result.status is S.CLOSING and result.version == 3


def test_update_status_refuses_forbidden_moves_and_noops_on_same(
    store: ss.SessionStore, active: ss.Session
) -> None:
    with pytest.raises(ss.InvalidTransition):
        store.update_status(active.session_id, S.CLOSED, owner="alice")
    assert store.update_status(active.session_id, S.ACTIVE, owner="alice").version == 2


def test_retries_are_bounded_with_backoff_and_jitter(
    client: Any, table: str, clock: ss.ManualClock
) -> None:
    sleeps: list[float] = []
    policy = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05, sleep=sleeps.append)
    store = ss.SessionStore(client, table, clock=clock, retry=policy)
    sid = store.create_session().session_id
    store.activate(sid)

    # Another writer commits before every attempt, so ours can never win.
    rival = ss.SessionStore(ss.connect(client.meta.endpoint_url), table, clock=clock)

    def interfere(**_: Any) -> None:
        rival.append_context(sid, ["rival"])

    client.meta.events.register("before-call.dynamodb.UpdateItem", interfere)
    try:
        with pytest.raises(ss.ConflictRetriesExhausted) as err:
            store.update_status(sid, S.CLOSING)
    finally:
        client.meta.events.unregister("before-call.dynamodb.UpdateItem", interfere)
    assert len(sleeps) == 3  # between 4 attempts
    caps = [min(0.05, 0.01 * 2**n) for n in range(3)]
    assert all(0 <= s <= cap for s, cap in zip(sleeps, caps, strict=True))
    assert err.value.current.status is S.ACTIVE


def test_source_update_loop_costs_two_requests_per_attempt(
    store: ss.SessionStore, client: Any, table: str, requests: RequestLog
) -> None:
    sid = store.create_session().session_id
    store.activate(sid)
    requests.reset()
    source_design.update_session_status(client, sid, "closing", table=table)
    assert requests.counts() == {"GetItem": 1, "UpdateItem": 1}
