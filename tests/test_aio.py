"""AsyncSessionStore: the synchronous store's semantics, without blocking the event loop."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
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
    astore = AsyncSessionStore(store)
    session = store.create_session(owner="alice")

    def slow(**_: Any) -> None:
        time.sleep(0.5)  # a slow DynamoDB round trip, inside botocore, on the calling thread

    async def main() -> tuple[int, float]:
        ticks: list[float] = []
        stop = asyncio.Event()

        async def heartbeat() -> None:
            for _ in range(1000):
                if stop.is_set():
                    return
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        beat = asyncio.create_task(heartbeat())
        await asyncio.sleep(0.05)
        store.client.meta.events.register("before-send.dynamodb", slow)
        try:
            started = time.monotonic()
            await astore.activate(session.session_id, owner="alice")
            elapsed = time.monotonic() - started
        finally:
            store.client.meta.events.unregister("before-send.dynamodb", slow)
            stop.set()
            await beat
        during = [t for t in ticks if started <= t <= started + elapsed]
        gaps = [b - a for a, b in itertools.pairwise(during)]
        assert elapsed >= 0.5
        return len(during), max(gaps)

    count, worst_gap = _run(main())
    assert count >= 20, f"only {count} heartbeats in half a second: the loop was blocked"
    assert worst_gap < 0.2


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
