"""The context in page items: reading it (whole, from a position, lazily, as a snapshot), holes
left by failed or in-flight appends, earlier sessions' pages, old-layout sessions, cost, and
concurrent appenders in threads and processes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import pytest

import sessionstore as ss
from sessionstore import schema, sizing
from sessionstore.context import IN_FLIGHT_S
from sessionstore.local import LocalDynamoDB
from sessionstore.retry import RetryPolicy
from sessionstore.testing import Fault, FaultInjector, RequestLog
from tests.conftest import scan
from tests.support.appenders import append_all, check
from tests.support.items import stored

OWNER = "alice"


def _page(client: Any, table: str, sid: str, last_seq: int) -> dict[str, Any]:
    return stored(client, table, sid, schema.page_sk(last_seq))


def _put_old_page(
    client: Any, table: str, last: int, text: str, ttl: int, incarnation: str | None = None
) -> None:
    """A one-message page of an earlier session ``s1``, written around the store (``None``:
    from before pages carried the session's incarnation)."""
    item = {
        "pk": {"S": schema.pk("s1")},
        "sk": {"S": schema.page_sk(last)},
        "first": {"N": str(last)},
        "messages": {"L": [{"S": text}]},
        "ttl": {"N": str(ttl)},
        "token": {"S": "old"},
    }
    if incarnation is not None:
        item["createToken"] = {"S": incarnation}
    client.put_item(TableName=table, Item=item)


def _fresh(client: Any, table: str, clock: ss.ManualClock, prefix: str = "r") -> ss.SessionStore:
    return ss.SessionStore(
        client,
        table,
        clock=clock,
        ids=ss.CounterIds(prefix),
        retry=RetryPolicy(sleep=lambda _s: None),
    )


# ------------------------------------------------------------------ reading


def test_context_follows_query_pagination_lazily(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    """1.4 MB of messages: more than one Query page (1 MB each); the reader sends the next
    Query only when the iteration gets there."""
    sid = active.session_id
    big = "x" * 40_000
    for n in range(35):
        store.append_context(sid, [{"n": n, "pad": big}], owner=OWNER)
    requests.reset()
    reader = store.context(sid, owner=OWNER)
    assert requests.operations == ["Query"]  # the first page, with the session checked
    got = [m["n"] for m in reader]  # type: ignore[index]
    assert got == list(range(35))
    assert requests.operations.count("Query") >= 2
    assert reader.position == 34


def test_context_after_starts_at_the_page_holding_the_next_seq(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    sid = active.session_id
    for batch in (["a", "b", "c"], ["d"], ["e", "f"]):  # pages msg#2, msg#3, msg#5
        store.append_context(sid, batch, owner=OWNER)
    for after, want in [(0, "bcdef"), (1, "cdef"), (2, "def"), (3, "ef"), (4, "f"), (5, "")]:
        requests.reset()
        reader = store.context(sid, owner=OWNER, after=after)
        assert "".join(str(m) for m in reader) == want
        assert reader.position == (5 if want else after)
        assert requests.operations == ["GetItem", "Query"]
    # resuming from where a reader stopped picks up exactly what came since
    reader = store.context(sid, owner=OWNER)
    assert list(reader) == list("abcdef")
    store.append_context(sid, ["g", "h"], owner=OWNER)
    assert list(store.context(sid, owner=OWNER, after=reader.position)) == ["g", "h"]


@pytest.mark.parametrize("after", [-1, True, "3", 1.0])
def test_after_is_validated(store: ss.SessionStore, active: ss.Session, after: Any) -> None:
    with pytest.raises(ss.InvalidInput):
        store.context(active.session_id, owner=OWNER, after=after)


def test_context_of_a_missing_expired_or_foreign_session_raises_at_the_call(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock
) -> None:
    store.append_context(active.session_id, ["secret"], owner=OWNER)
    for after in (None, 0):
        with pytest.raises(ss.SessionNotFound):
            store.context("missing", after=after)
        with pytest.raises(ss.SessionNotFound):
            store.context(active.session_id, owner="bob", after=after)
    clock.advance(seconds=86400)
    with pytest.raises(ss.SessionExpired):
        store.context(active.session_id, owner=OWNER)


def test_a_reader_shows_the_appends_begun_before_it_read_the_metadata_item(
    store: ss.SessionStore, active: ss.Session
) -> None:
    sid = active.session_id
    store.append_context(sid, ["one", "two"], owner=OWNER)
    reader = store.context(sid, owner=OWNER)  # metadata item read: two messages reserved
    store.append_context(sid, ["three"], owner=OWNER)
    assert list(reader) == ["one", "two"]
    assert list(store.context(sid, owner=OWNER, after=reader.position)) == ["three"]


def test_load_is_one_query_for_metadata_context_and_history(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    sid = active.session_id
    store.append_context(sid, ["hello"], owner=OWNER)
    store.record_tool_call(sid, "c1", "search", {"q": 1}, {"hits": []}, 5, owner=OWNER)
    store.append_context(sid, [{"role": "tool", "id": "c1"}, "bye"], owner=OWNER)
    requests.reset()
    loaded = store.load(sid, owner=OWNER)
    assert requests.operations == ["Query"]
    session, context, calls = loaded
    assert session == store.get_session(sid, owner=OWNER)
    assert context == ["hello", {"role": "tool", "id": "c1"}, "bye"]
    assert [c.tool_call_id for c in calls] == ["c1"]
    assert isinstance(loaded, ss.Loaded) and loaded.context is context


def test_tool_calls_do_not_read_the_context(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    sid = active.session_id
    store.append_context(sid, ["x" * 50_000], owner=OWNER)
    store.record_tool_call(sid, "c1", "t", {}, {}, 1, owner=OWNER)
    requests.reset()
    records = list(store.tool_calls(sid, owner=OWNER))
    assert [r.tool_call_id for r in records] == ["c1"]
    assert requests.operations == ["GetItem", "Query"]


# ------------------------------------------------------------------ holes


def test_a_page_that_could_not_be_written_leaves_a_hole_readers_wait_for_then_skip(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore, active: ss.Session
) -> None:
    """The reservation landed, the page was throttled on every attempt: the messages were not
    stored (``maybe_applied=False``). While the append might still be in flight readers stop
    before the hole (so reading on later misses nothing); after ``IN_FLIGHT_S`` they skip it."""
    sid = active.session_id
    store.append_context(sid, ["before"], owner=OWNER)
    # One attempt per request: the throttles end the page write at once, not after backoff.
    quick = ss.connect(client.meta.endpoint_url, max_attempts=1)
    writer = ss.SessionStore(quick, table, clock=clock, ids=ss.CounterIds("q"))
    with (
        FaultInjector(quick, rates={Fault.THROTTLE: 1.0}, operations=["PutItem"]),
        pytest.raises(ss.Unavailable) as caught,
    ):
        writer.append_context(sid, ["lost"], owner=OWNER)
    assert not caught.value.maybe_applied
    other = _fresh(client, table, clock, "o")
    after = other.append_context(sid, ["after"], owner=OWNER)
    assert after.message_count == 3  # the hole is counted
    reader = other.context(sid, owner=OWNER)
    assert list(reader) == ["before"]
    assert reader.position == 0
    clock.advance(seconds=IN_FLIGHT_S + 1)
    assert list(other.context(sid, owner=OWNER, after=reader.position)) == ["after"]
    assert list(other.context(sid, owner=OWNER)) == ["before", "after"]


def test_the_failed_appends_instance_clears_its_hole_with_its_next_write(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore, active: ss.Session
) -> None:
    sid = active.session_id
    # One attempt per request: the throttles end the page write at once, not after backoff.
    quick = ss.connect(client.meta.endpoint_url, max_attempts=1)
    writer = ss.SessionStore(quick, table, clock=clock, ids=ss.CounterIds("q"))
    with (
        FaultInjector(quick, rates={Fault.THROTTLE: 1.0}, operations=["PutItem"]),
        pytest.raises(ss.Unavailable),
    ):
        writer.append_context(sid, ["lost"], owner=OWNER)
    writer.append_context(sid, ["next"], owner=OWNER)  # removes the failed append's token
    assert list(_fresh(client, table, clock).context(sid, owner=OWNER)) == ["next"]


@pytest.mark.parametrize("fault", [Fault.SERVER_ERROR, Fault.LOST_RESPONSE])
def test_an_append_whose_reservation_is_in_doubt_says_its_messages_were_not_stored(
    client: Any,
    table: str,
    clock: ss.ManualClock,
    store: ss.SessionStore,
    active: ss.Session,
    fault: Fault,
) -> None:
    """The metadata write ended in doubt (a 500, or every response lost): the page was never
    sent, so the messages are certainly not stored -- ``maybe_applied=False``, safe to call
    again -- whether or not the reservation landed."""
    sid = active.session_id
    with (
        FaultInjector(client, rates={fault: 1.0}, operations=["UpdateItem"]),
        pytest.raises(ss.Unavailable) as caught,
    ):
        store.append_context(sid, ["maybe"], owner=OWNER)
    assert not caught.value.maybe_applied
    assert "not stored" in str(caught.value)
    assert not [i for i in scan(client, table) if i["sk"]["S"].startswith("msg#")]
    reserved = store.get_session(sid, owner=OWNER).message_count
    assert reserved == (1 if fault is Fault.LOST_RESPONSE else 0)
    store.append_context(sid, ["maybe"], owner=OWNER)  # the documented answer: call again
    clock.advance(seconds=IN_FLIGHT_S + 1)
    assert list(store.context(sid, owner=OWNER)) == ["maybe"]


def test_a_page_whose_responses_were_all_lost_is_maybe_applied_and_stored_once(
    client: Any, store: ss.SessionStore, active: ss.Session
) -> None:
    sid = active.session_id
    with (
        FaultInjector(client, rates={Fault.LOST_RESPONSE: 1.0}, operations=["PutItem"]),
        pytest.raises(ss.Unavailable) as caught,
    ):
        store.append_context(sid, ["landed"], owner=OWNER)
    assert caught.value.maybe_applied
    assert list(store.context(sid, owner=OWNER)) == ["landed"]


# ------------------------------------------------------------------ earlier sessions, old layout


def test_an_earlier_sessions_pages_are_replaced_and_never_shown(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore
) -> None:
    """TTL deletes late and one item at a time: the metadata item of an expired session under
    this id is gone, two of its pages are not yet."""
    now_s = clock.now_ms() // 1000
    for last, text in ((0, '"old zero"'), (1, '"old one"')):
        _put_old_page(client, table, last, text, now_s - 10)
    store.activate(store.create_session("s1", owner=OWNER).session_id, owner=OWNER)
    store.append_context("s1", ["new"], owner=OWNER)  # replaces the expired msg#0
    assert list(store.context("s1", owner=OWNER)) == ["new"]
    assert store.load("s1", owner=OWNER).context == ["new"]
    assert _page(client, table, "s1", 0)["token"]["S"] != "old"


def _append_wcu(client: Any, table: str, store: ss.SessionStore, sid: str, message: Any) -> int:
    """WCU of one single-message append, from the items as stored: the metadata UpdateItem is
    billed on the larger of the item before and after, the page PutItem on the page."""
    before = sizing.item_size(stored(client, table, sid))
    session = store.append_context(sid, [message], owner=OWNER)
    after = sizing.item_size(stored(client, table, sid))
    page = sizing.item_size(_page(client, table, sid, session.message_count - 1))
    return sizing.write_units(max(before, after)) + sizing.write_units(page)


def _transition_wcu(client: Any, table: str, store: ss.SessionStore, sid: str) -> int:
    before = sizing.item_size(stored(client, table, sid))
    store.begin_close(sid, owner=OWNER)
    return sizing.write_units(max(before, sizing.item_size(stored(client, table, sid))))


def test_ten_thousand_messages_of_500_bytes_round_trip_at_flat_cost(
    client: Any, table: str, store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    """Issue 11's bar: 10,000 messages of 500 B stored and read back exactly; an append costs
    the same at message 10,000 as at message 100, at most 3 WCU; a transition at most 2."""
    sid = active.session_id

    def message(n: int) -> dict[str, Any]:
        text = f"message {n:05d} "
        return {"role": "user", "id": f"{n:05d}", "content": (text * 40)[: 500 - 41]}

    assert len(json.dumps(message(0), separators=(",", ":"))) == 500
    store.append_context(sid, [message(n) for n in range(99)], owner=OWNER)
    wcu_at_100 = _append_wcu(client, table, store, sid, message(99))
    for start in range(100, 9_999, 100):  # in batches, to keep the test fast
        store.append_context(
            sid, [message(n) for n in range(start, min(start + 100, 9_999))], owner=OWNER
        )
    wcu_at_10000 = _append_wcu(client, table, store, sid, message(9_999))
    assert wcu_at_100 == wcu_at_10000 <= 3
    requests.reset()
    messages = list(store.context(sid, owner=OWNER))
    queries = requests.count
    assert messages == [message(n) for n in range(10_000)]
    assert store.load(sid, owner=OWNER).context == messages
    assert _transition_wcu(client, table, store, sid) <= 2
    print(f"WCU per append at 100: {wcu_at_100}, at 10,000: {wcu_at_10000}; read: {queries} Query")


# ------------------------------------------------------------------ concurrency


def test_threads_and_processes_appending_lose_and_double_nothing(
    engine: LocalDynamoDB, client: Any, table: str
) -> None:
    """8 threads and 4 processes append to one session, a page per append (1-3 messages):
    every acknowledged message is there once, each writer's in its order, and the count of
    the metadata item is exactly what the pages hold."""
    owner_store = ss.SessionStore(client, table)
    sid = owner_store.activate(owner_store.create_session().session_id).session_id
    appends = 15
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.appenders",
                *("--endpoint", engine.endpoint_url, "--table", table, "--session", sid),
                *("--writer", f"p{i}", "--appends", str(appends), "--deadline", "90"),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    acked: dict[str, list[int]] = {}
    lock = threading.Lock()

    def thread(i: int) -> None:
        store = ss.SessionStore(ss.connect(engine.endpoint_url), table)
        got = append_all(store, sid, f"t{i}", appends, deadline_s=90)
        with lock:
            acked[f"t{i}"] = got

    threads = [threading.Thread(target=thread, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive()
    for p in processes:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        report = json.loads(out)
        acked[report["writer"]] = report["acked"]
    counts = check(owner_store.context(sid), acked)
    total = sum(len(v) for v in acked.values())
    assert counts == {"writers": 12, "messages": total}
    assert total == 12 * sum(1 + k % 3 for k in range(appends))  # nothing was refused
    assert owner_store.get_session(sid).message_count == total


# ------------------------------------------------------------------ from the review


def test_a_page_is_not_sent_once_readers_may_have_stopped_waiting_for_it(
    engine: LocalDynamoDB, table: str, clock: ss.ManualClock, active: ss.Session
) -> None:
    """The reservation's responses were lost twice (botocore's 60 s read timeout each): by the
    time it is settled, readers may have skipped its hole. The page is not sent -- the append
    says its messages were not stored -- so what a reader showed stays a prefix."""
    sid = active.session_id
    writer_client = ss.connect(engine.endpoint_url)
    writer = _fresh(writer_client, table, clock, "w")
    other = _fresh(ss.connect(engine.endpoint_url), table, clock, "o")
    seen: dict[str, Any] = {}
    lost = [0]

    def after_lost(_operation: str) -> None:
        lost[0] += 1
        clock.advance(seconds=61)
        if lost[0] == 2:
            other.append_context(sid, ["B"], owner=OWNER)
            reader = other.context(sid, owner=OWNER)
            seen["shown"], seen["position"] = list(reader), reader.position

    with (
        FaultInjector(
            writer_client,
            script=[Fault.LOST_RESPONSE, Fault.LOST_RESPONSE],
            operations=["UpdateItem"],
            after_lost=after_lost,
        ),
        pytest.raises(ss.Unavailable) as caught,
    ):
        writer.append_context(sid, ["A"], owner=OWNER)
    assert not caught.value.maybe_applied and "not sent" in str(caught.value)
    assert (seen["shown"], seen["position"]) == (["B"], 1)
    assert list(other.context(sid, owner=OWNER)) == ["B"]  # what was shown is still a prefix
    assert list(other.context(sid, owner=OWNER, after=1)) == []


def test_an_earlier_incarnations_live_pages_are_replaced_and_never_shown(
    client: Any, table: str, clock: ss.ManualClock, store: ss.SessionStore
) -> None:
    """Clock skew: DynamoDB has removed the earlier session's metadata item while our clock
    says its pages' ttl has not quite passed. The incarnation tells them apart."""
    now_s = clock.now_ms() // 1000
    for last in (0, 1):
        _put_old_page(client, table, last, f'"old {last}"', now_s + 30, "earlier-incarnation")
    store.activate(store.create_session("s1", owner=OWNER).session_id, owner=OWNER)
    assert list(store.context("s1", owner=OWNER)) == []
    store.append_context("s1", ["new"], owner=OWNER)  # replaces the earlier msg#0
    assert list(store.context("s1", owner=OWNER)) == ["new"]
    assert store.load("s1", owner=OWNER).context == ["new"]
