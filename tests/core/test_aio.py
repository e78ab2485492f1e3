"""AsyncSessionStore: the synchronous store's semantics, without blocking the event loop."""

from __future__ import annotations

import asyncio
import random
import threading
from typing import Any

import pytest

import sessionstore as ss
from sessionstore.aio import AsyncSessionStore


def _run(coro: Any, timeout: float = 30) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


def test_100_concurrent_appends_on_one_session_lose_nothing(client: Any, table: str) -> None:
    # Real backoff (the fixture's no-sleep policy would hammer) and more attempts than the
    # default 16: 8 workers on one session for the whole run is contention far past the
    # default's design point, and a give-up (ConflictRetriesExhausted) is not what is tested.
    retry = ss.RetryPolicy(max_attempts=64, rng=random.Random(0))
    astore = AsyncSessionStore(ss.SessionStore(client, table, retry=retry), max_workers=8)

    async def main() -> tuple[ss.Session, list[Any]]:
        session = await astore.create_session(owner="alice")
        await astore.activate(session.session_id, owner="alice")

        async def append(i: int) -> None:
            await astore.append_context(session.session_id, [{"n": i}], owner="alice")

        await asyncio.gather(*(append(i) for i in range(100)))
        final = await astore.get_session(session.session_id, owner="alice")
        messages = [m async for m in await astore.context(session.session_id, owner="alice")]
        return final, messages

    final, messages = _run(main())
    # Every append stored exactly once: no message lost, none twice (a sorted comparison
    # of the list, not a set, so a duplicate fails too).
    assert sorted(m["n"] for m in messages) == list(range(100))
    assert final.message_count == 100
    assert final.version == 2 + 100  # created (1), activated (2), then one per append


def test_the_loop_keeps_ticking_during_a_slow_engine_call(store: ss.SessionStore) -> None:
    # No bound on latency (a busy machine can break any): the engine call is held inside
    # botocore until the loop has ticked WANTED times, so passing needs only that the loop runs
    # during the call at all. Had the call blocked the loop, no tick could happen while it is
    # held: the wait would time out and the count be 0.
    wanted = 5
    astore = AsyncSessionStore(store)
    session = store.create_session(owner="alice")
    ticks = 0  # the loop's heartbeats, counted on the loop's thread
    held: list[int] = []  # ticks when the request reached the engine call
    during: list[int] = []  # ticks strictly between its start and its end
    enough = threading.Event()

    def slow(**_: Any) -> None:  # a slow DynamoDB round trip, on the calling thread
        held.append(ticks)
        enough.wait(timeout=10)
        during.append(ticks - held[-1])

    async def main() -> ss.Session:
        stop = asyncio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            for _ in range(100_000):  # bounded: 1000 s of ticks, far past the call's timeout
                if stop.is_set():
                    return
                ticks += 1
                if held and ticks - held[0] >= wanted:
                    enough.set()
                await asyncio.sleep(0.01)

        beat = asyncio.create_task(heartbeat())
        store.client.meta.events.register("before-send.dynamodb", slow)
        try:
            return await astore.activate(session.session_id, owner="alice")
        finally:
            store.client.meta.events.unregister("before-send.dynamodb", slow)
            stop.set()
            await beat

    activated = _run(main())
    assert activated.status is ss.Status.ACTIVE
    assert during, "the request never reached the engine call"
    assert during[0] >= wanted, f"{during[0]} heartbeats during the engine call: loop blocked"


def test_attributes_through_the_async_store(store: ss.SessionStore) -> None:
    astore = AsyncSessionStore(store)

    async def main() -> tuple[ss.Session, ss.Session]:
        created = await astore.create_session(owner="alice", attributes={"title": "t", "n": 1})
        sid = created.session_id
        await astore.update_attributes(
            sid, {"n": 2, "client": {"name": "cli"}}, remove=["title"], owner="alice"
        )
        updated = await astore.get_session(sid, owner="alice")
        with pytest.raises(ss.VersionConflict) as caught:
            await astore.update_attributes(
                sid, {"n": 3}, expected_version=created.version, owner="alice"
            )
        assert caught.value.current == updated
        with pytest.raises(ss.InvalidInput):  # same validation: nothing to change
            await astore.update_attributes(sid, {}, owner="alice")
        return created, updated

    created, updated = _run(main())
    assert dict(created.attributes) == {"title": "t", "n": 1}
    assert dict(updated.attributes) == {"n": 2, "client": {"name": "cli"}}
    assert updated.version == created.version + 1
    # In the table, not only in the returned copy: a store with no hints reads it back.
    fresh = ss.SessionStore(store.client, store.table_name, clock=store.clock)
    assert fresh.get_session(created.session_id, owner="alice") == updated


def test_same_errors_and_paged_history(store: ss.SessionStore) -> None:
    astore = AsyncSessionStore(store)

    async def main() -> list[str]:
        with pytest.raises(ss.SessionNotFound):
            await astore.get_session("nope", owner="alice")
        session = await astore.create_session(owner="alice")
        sid = session.session_id
        await astore.activate(sid, owner="alice")
        with pytest.raises(ss.InvalidTransition):
            await astore.transition(sid, ss.Status.INITIALIZING, owner="alice")
        for i in range(3):
            await astore.record_tool_call(sid, f"c{i}", "echo", {"i": i}, i, 1, owner="alice")
        with pytest.raises(ss.SessionNotFound):  # raised by the call, before any iteration
            await astore.tool_calls(sid, owner="mallory")
        ids = [r.tool_call_id async for r in await astore.tool_calls(sid, owner="alice")]
        await astore.append_context(sid, [{"hello": 1}, "world"], owner="alice")
        loaded, context, history = await astore.load(sid, owner="alice")
        assert [r.tool_call_id for r in history] == ids and loaded.status is ss.Status.ACTIVE
        assert context == [{"hello": 1}, "world"]
        assert [m async for m in await astore.context(sid, owner="alice")] == list(context)
        with pytest.raises(ss.SessionNotFound):  # raised by the call, before any iteration
            await astore.context(sid, owner="mallory")
        return ids

    assert _run(main()) == ["c0", "c1", "c2"]


def test_bad_arguments_are_refused(store: ss.SessionStore) -> None:
    with pytest.raises(ss.InvalidInput):
        AsyncSessionStore(store, max_workers=0)
    with pytest.raises(ss.InvalidInput):
        AsyncSessionStore("not a store")  # type: ignore[arg-type]


def test_what_the_stores_were_built_with_is_read_through_and_read_only(
    store: ss.SessionStore,
) -> None:
    astore = AsyncSessionStore(store)
    table = store.table
    seen = {
        "client": (store.client, astore.client, table.client),
        "table_name": (store.table_name, astore.table_name, table.name),
        "clock": (store.clock, astore.clock, table.clock),
        "ids": (store.ids, astore.ids, table.ids),
        "item_size_limit": (store.item_size_limit, astore.item_size_limit, table.item_size_limit),
    }
    for name, (sync, aio, expected) in seen.items():
        assert sync is expected and aio is expected, name
        for holder in (store, astore):
            with pytest.raises(AttributeError):
                setattr(holder, name, expected)
    # Looked up on the class, the attribute is there (help(), the API reference, hasattr).
    assert hasattr(ss.SessionStore, "clock") and hasattr(AsyncSessionStore, "clock")


def test_a_lazy_reader_reads_its_pages_on_a_worker_thread(store: ss.SessionStore) -> None:
    # From ``after``, the call reads the metadata item and the Query of the pages waits for
    # the first next(): that Query must be sent from a worker thread, never the loop's.
    astore = AsyncSessionStore(store)
    session = store.create_session(owner="alice")
    store.activate(session.session_id, owner="alice")
    for i in range(3):
        store.append_context(session.session_id, [{"n": i}], owner="alice")
    sent: list[tuple[str, int]] = []

    def record(event_name: str, **_: Any) -> None:
        sent.append((event_name.rsplit(".", 1)[-1], threading.get_ident()))

    async def main() -> tuple[int, list[Any], list[tuple[str, int]]]:
        loop_thread = threading.get_ident()
        messages = await astore.context(session.session_id, owner="alice", after=0)
        before = list(sent)
        return loop_thread, [m async for m in messages], before

    store.client.meta.events.register("before-call.dynamodb", record)
    try:
        loop_thread, messages, before_iteration = _run(main())
    finally:
        store.client.meta.events.unregister("before-call.dynamodb", record)
    assert messages == [{"n": 1}, {"n": 2}]
    assert [op for op, _ in before_iteration] == ["GetItem"]  # the call: the session checked
    assert [op for op, _ in sent] == ["GetItem", "Query"]  # the pages: during the iteration
    assert all(thread != loop_thread for _, thread in sent)


def test_a_subclass_of_the_store_runs_its_own_method(client: Any, table: str) -> None:
    class Counting(ss.SessionStore):
        reads = 0

        def get_session(self, session_id: str, *, owner: str | None = None) -> ss.Session:
            Counting.reads += 1
            return super().get_session(session_id, owner=owner)

    sync = Counting(client, table)
    session = sync.create_session(owner="alice")
    got = _run(AsyncSessionStore(sync).get_session(session.session_id, owner="alice"))
    assert got.session_id == session.session_id and Counting.reads == 1
