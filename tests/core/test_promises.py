"""Promises kept at the edges: each test here was written against a way the store once broke
one (a token shared by forked workers, an append answering with a later session, a page
landing after readers stopped waiting, tokens leaked by writes of unknown outcome, an idle
deadline moved backwards), and checks the promise on the real embedded engine."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
from collections.abc import Callable
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config

import sessionstore as ss
from sessionstore import schema, write_tokens
from sessionstore.context import IN_FLIGHT_S, PAGE_DEADLINE_S, send_by_ms, stated_delay
from sessionstore.retry import RetryPolicy
from sessionstore.testing import Fault, FaultInjector
from tests.conftest import scan

NO_SLEEP = RetryPolicy(sleep=lambda _s: None)


# ---------------------------------------------------------------------------- forked workers


def _append_in_child(
    endpoint: str,
    table: str,
    ids: ss.IdFactory,
    session_id: str,
    tag: str,
    count: int,
    results: Any,
) -> None:
    # A worker of a pre-fork server: a client of its own, the parent's id factory inherited.
    store = ss.SessionStore(ss.connect(endpoint), table, ids=ids, retry=NO_SLEEP)
    acked = []
    for i in range(count):
        store.append_context(session_id, [f"{tag}-{i}"])
        acked.append(f"{tag}-{i}")
    results.put(acked)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_workers_never_share_a_request_token(engine: Any, client: Any, table: str) -> None:
    ids = ss.RandomIds()
    parent = ss.SessionStore(client, table, ids=ids, retry=NO_SLEEP)
    session = parent.create_session()
    parent.activate(session.session_id)  # the parent has drawn its tokens' prefix
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    workers = [
        context.Process(
            target=_append_in_child,
            args=(engine.endpoint_url, table, ids, session.session_id, tag, 5, results),
        )
        for tag in ("a", "b")
    ]
    for worker in workers:
        worker.start()
    acked = [message for _ in workers for message in results.get(timeout=60)]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    stored = list(parent.context(session.session_id))
    assert len(acked) == 10
    assert sorted(stored) == sorted(acked)  # every acknowledged append is there, once


def test_random_ids_are_not_pickled_with_their_prefix() -> None:
    ids = ss.RandomIds()
    first = ids.token()
    copy = pickle.loads(pickle.dumps(ids))
    assert copy.token().split(".")[0] != first.split(".")[0]


# ---------------------------------------------------------------------------- token leak


def test_writes_of_unknown_outcome_leak_no_tokens(engine: Any, table: str) -> None:
    """A write that may not have landed must not make the instance forget the tokens its
    request would have removed: 100 of them would fill ``tk`` for an hour, for everyone."""
    single = ss.connect(engine.endpoint_url, max_attempts=1)  # no botocore retries: fast
    clock = ss.ManualClock("2026-01-01T12:00:00Z")
    store = ss.SessionStore(single, table, clock=clock, ids=ss.CounterIds(), retry=NO_SLEEP)
    session = store.create_session()
    sid = session.session_id
    store.activate(sid)
    for _ in range(write_tokens.TOKEN_CAP):
        store.append_context(sid, ["landed"])
        # Every send of the next reservation meets a server error: it may have landed.
        faults = FaultInjector(single, script=[Fault.SERVER_ERROR] * 3, operations=["UpdateItem"])
        with faults, pytest.raises(ss.Unavailable):
            store.append_context(sid, ["unknown"])
    item = single.get_item(TableName=table, Key=schema.meta_key(sid), ConsistentRead=True)["Item"]
    assert len(item["tk"]["M"]) <= 2  # each landed write removed what came before it
    # Another instance, which can remove nobody's young tokens, still gets its write in.
    other = ss.SessionStore(single, table, clock=clock, ids=ss.CounterIds("o"), retry=NO_SLEEP)
    assert other.append_context(sid, ["from another instance"]).message_count > 0


# ---------------------------------------------------------------------------- settled appends


def _rival_appending(
    store: ss.SessionStore, engine: Any, table: str, sid: str
) -> Callable[[str], None]:
    """An ``after_lost`` hook: another instance appends once our lost reservation landed."""
    rival = ss.SessionStore(
        ss.connect(engine.endpoint_url), table, clock=store.clock, ids=ss.CounterIds("r")
    )

    def rival_appends(operation: str) -> None:
        if operation == "UpdateItem":
            rival.append_context(sid, ["theirs"], owner="alice")

    return rival_appends


def test_an_append_settled_after_a_lost_response_returns_where_it_ended(
    store: ss.SessionStore, active: ss.Session, client: Any, engine: Any, table: str
) -> None:
    """The response of our reservation is lost and another writer appends before our retry
    settles it: the session returned must end at *our* messages, so a reader continuing from
    its position still sees the other writer's message."""
    sid = active.session_id
    rival_appends = _rival_appending(store, engine, table, sid)
    faults = FaultInjector(client, script=[Fault.LOST_RESPONSE], after_lost=rival_appends)
    with faults:
        ours = store.append_context(sid, ["mine"], owner="alice")
    assert faults.injected[Fault.LOST_RESPONSE] == 1
    assert list(store.context(sid, owner="alice")) == ["mine", "theirs"]
    # position = message_count: the seq of our last message is one below it
    assert ours.message_count == 1
    reader = store.context(sid, owner="alice", after=ours.message_count - 1)
    assert list(reader) == ["theirs"]


def test_a_pinned_append_settled_late_returns_the_version_it_set(
    store: ss.SessionStore, active: ss.Session, client: Any, engine: Any, table: str
) -> None:
    sid = active.session_id
    rival_appends = _rival_appending(store, engine, table, sid)
    with FaultInjector(client, script=[Fault.LOST_RESPONSE], after_lost=rival_appends):
        ours = store.append_context(sid, ["mine"], owner="alice", expected_version=active.version)
    assert ours.version == active.version + 1
    # Pinned on what it returned, the next append is refused: the session moved on since.
    with pytest.raises(ss.VersionConflict):
        store.append_context(sid, ["next"], owner="alice", expected_version=ours.version)


# ---------------------------------------------------------------------------- late pages


def test_a_page_is_never_sent_after_readers_stopped_waiting(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    """botocore retries one driver attempt for as long as its timeouts and backoff allow: a
    retry sent after the window would land a page a reader had already skipped."""
    sid = active.session_id
    clock = store.clock
    assert isinstance(clock, ss.ManualClock)

    def time_passes(**_: Any) -> None:
        clock.advance(seconds=IN_FLIGHT_S)  # botocore's backoff and timeouts, compressed

    client.meta.events.register("needs-retry.dynamodb.PutItem", time_passes)
    try:
        with (
            FaultInjector(client, script=[Fault.THROTTLE], operations=["PutItem"]) as faults,
            pytest.raises(ss.Unavailable) as refused,
        ):
            store.append_context(sid, ["late"], owner="alice")
    finally:
        client.meta.events.unregister("needs-retry.dynamodb.PutItem", time_passes)
    assert faults.injected[Fault.THROTTLE] == 1
    assert refused.value.maybe_applied is False  # the page was never sent
    pages = [i for i in scan(client, table) if i["sk"]["S"].startswith(schema.PAGE_PREFIX)]
    assert pages == []
    # A reader past the window skips the hole; what follows is read, and nothing comes later.
    store.append_context(sid, ["next"], owner="alice")
    assert list(store.context(sid, owner="alice")) == ["next"]


def test_a_client_with_long_timeouts_makes_readers_wait_longer(
    engine: Any, table: str, clock: ss.ManualClock
) -> None:
    slow = ss.connect(engine.endpoint_url, config=Config(connect_timeout=60, read_timeout=60))
    store = ss.SessionStore(slow, table, clock=clock, ids=ss.CounterIds(), retry=NO_SLEEP)
    sid = store.create_session().session_id
    store.activate(sid)
    session = store.append_context(sid, ["m"])
    entry = session.write_tokens[write_tokens.key("t-0003")]
    stated = write_tokens.token_time(entry)
    now_s = clock.now_ms() // 1000
    # 60 s to send + 120 s to land + 30 s of skew = 90 s past the 120 s readers wait anyway.
    assert stated == now_s + stated_delay(120) == now_s + 90
    assert send_by_ms(entry, 120) == (now_s + PAGE_DEADLINE_S) * 1000


# ---------------------------------------------------------------------------- lagging clocks


def test_a_lagging_clock_never_moves_the_idle_deadline_back(
    client: Any, table: str, clock: ss.ManualClock
) -> None:
    """A writer whose clock lags by the idle period: its append, touch and tool record land,
    and the session stays as long-lived as the punctual writer left it."""
    idle = 600
    punctual = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds("p"), retry=NO_SLEEP)
    lagging_clock = ss.ManualClock(clock.now_ms() - idle * 1000)
    lagging = ss.SessionStore(
        client, table, clock=lagging_clock, ids=ss.CounterIds("l"), retry=NO_SLEEP
    )
    sid = punctual.create_session(idle_seconds=idle).session_id
    deadline = punctual.activate(sid).idle_until
    assert deadline == clock.now_ms() // 1000 + idle
    assert lagging.append_context(sid, ["late clock"]).idle_until == deadline
    assert lagging.touch(sid).idle_until == deadline
    lagging.record_tool_call(sid, "c1", "tool", {}, "out", 1)
    lagging.update_attributes(sid, {"k": 1})
    assert lagging.get_session(sid).idle_until == deadline
    assert lagging.transition(sid, ss.Status.ACTIVE).idle_until == deadline
    session = punctual.get_session(sid)
    assert session.idle_until == deadline  # not moved back by any of them
    assert list(punctual.context(sid)) == ["late clock"]
    assert [r.tool_call_id for r in punctual.tool_calls(sid)] == ["c1"]
    clock.advance(seconds=idle - 1)
    assert punctual.get_session(sid).status is ss.Status.ACTIVE  # still alive for everyone
    # A punctual write still moves it on.
    assert punctual.append_context(sid, ["on time"]).idle_until == deadline + idle - 1


# ---------------------------------------------------------------------------- partial engines


def test_an_operation_the_engine_lacks_is_named_by_every_write(
    store: ss.SessionStore, active: ss.Session, client: Any
) -> None:
    """An engine implementing part of the API (dynalite has no TransactWriteItems) answers
    400 ``UnknownOperationException`` with no message, injected here at botocore's level."""

    def unknown(request: Any, **_kwargs: Any) -> AWSResponse:
        body = json.dumps({"__type": "com.amazon.coral.service#UnknownOperationException"})
        headers: Any = {"Content-Type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, 400, headers, _Body(body.encode()))

    client.meta.events.register("before-send.dynamodb.TransactWriteItems", unknown)
    try:
        with pytest.raises(ss.DynamoDBError) as raised:
            store.record_tool_call(active.session_id, "c1", "t", {}, "out", 1, owner="alice")
    finally:
        client.meta.events.unregister("before-send.dynamodb.TransactWriteItems", unknown)
    assert raised.value.code == "UnknownOperationException"
    assert str(raised.value) == (
        f"UnknownOperationException: the engine at {client.meta.endpoint_url} lacks the "
        "TransactWriteItems operation, which this store needs"
    )


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_args: Any, **_kwargs: Any) -> Any:
        yield self._body
