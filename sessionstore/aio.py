"""``AsyncSessionStore``: the store for asyncio code (MCP servers), without blocking the loop.

Needs anyio (the ``mcp`` extra). boto3 blocks its thread for each round trip (and each conflict
backoff), so each call runs the *same* ``SessionStore`` method on a worker thread: the semantics,
errors and request counts are the synchronous store's, with no second implementation of every
condition and retry (as an async client such as aioboto3 would need), for a thread hop of tens of
microseconds against a round trip of milliseconds. The threads are bounded by a limiter of our
own (``max_workers``), so a burst of store calls cannot starve other ``to_thread`` users (sync
MCP tools run there too) nor open unbounded connections.

Cancellation waits for the worker: a write that has been sent is never abandoned half-way, so a
cancelled caller leaves the session exactly as a finished call would (the result is dropped).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from . import validate
from .clock import Clock
from .codec import JSON
from .errors import InvalidInput
from .ids import IdFactory
from .models import Loaded, Session, Status, ToolCallRecord
from .store import SessionStore

T = TypeVar("T")
#: Worker threads past this are a mistake: each blocks on one round trip at a time.
MAX_WORKERS = 1_024

_DONE = object()  # end of a paged iterator, passed back across the thread boundary


class AsyncSessionStore:
    """The ``SessionStore`` API as coroutines; each call runs in a bounded worker thread.

    ``AsyncSessionStore(SessionStore(client, ...))`` -- or ``AsyncSessionStore.wrap(client,
    ...)`` with the ``SessionStore`` arguments. ``store`` is the wrapped synchronous store.
    """

    def __init__(self, store: SessionStore, *, max_workers: int = 16) -> None:
        if not isinstance(store, SessionStore):
            raise InvalidInput(f"store must be a SessionStore, not {type(store).__name__}")
        validate.int_in("max_workers", max_workers, 1, MAX_WORKERS)
        self.store = store
        self.max_workers = max_workers
        # One limiter per event loop: an anyio limiter belongs to the loop that first used it,
        # and a store may outlive a loop (tests, notebooks re-running cells).
        self._limiter: RunVar[anyio.CapacityLimiter] = RunVar(f"sessionstore-aio-{id(self)}")

    @classmethod
    def wrap(
        cls, client: Any, table_name: str = "mcp-sessions", **kwargs: Any
    ) -> AsyncSessionStore:
        max_workers = kwargs.pop("max_workers", 16)
        return cls(SessionStore(client, table_name, **kwargs), max_workers=max_workers)

    # The injected collaborators, for code that builds its own requests next to the store's.
    @property
    def client(self) -> Any:
        return self.store.client

    @property
    def table_name(self) -> str:
        return self.store.table_name

    @property
    def clock(self) -> Clock:
        return self.store.clock

    @property
    def ids(self) -> IdFactory:
        return self.store.ids

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run any blocking ``fn(*args, **kwargs)`` on this store's bounded worker threads."""
        try:
            limiter = self._limiter.get()
        except LookupError:
            limiter = anyio.CapacityLimiter(self.max_workers)
            self._limiter.set(limiter)
        return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=limiter)

    async def create_table(self, *, wait: bool = True) -> bool:
        return await self.run(self.store.create_table, wait=wait)

    async def create_session(
        self,
        session_id: str | None = None,
        *,
        owner: str | None = None,
        ttl_seconds: int = 86400,
        idle_seconds: int | None = None,
        attributes: Mapping[str, JSON] | None = None,
    ) -> Session:
        return await self.run(
            self.store.create_session,
            session_id,
            owner=owner,
            ttl_seconds=ttl_seconds,
            idle_seconds=idle_seconds,
            attributes=attributes,
        )

    async def touch(self, session_id: str, *, owner: str | None = None) -> Session:
        return await self.run(self.store.touch, session_id, owner=owner)

    async def get_session(self, session_id: str, *, owner: str | None = None) -> Session:
        return await self.run(self.store.get_session, session_id, owner=owner)

    async def transition(self, session_id: str, to: Status, *, owner: str | None = None) -> Session:
        return await self.run(self.store.transition, session_id, to, owner=owner)

    async def activate(self, session_id: str, *, owner: str | None = None) -> Session:
        return await self.run(self.store.activate, session_id, owner=owner)

    async def begin_close(self, session_id: str, *, owner: str | None = None) -> Session:
        return await self.run(self.store.begin_close, session_id, owner=owner)

    async def close(self, session_id: str, *, owner: str | None = None) -> Session:
        return await self.run(self.store.close, session_id, owner=owner)

    async def close_and_expire(
        self, session_id: str, *, owner: str | None = None, expire_at: int
    ) -> None:
        await self.run(self.store.close_and_expire, session_id, owner=owner, expire_at=expire_at)

    async def update_status(
        self, session_id: str, status: Status, *, owner: str | None = None
    ) -> Session:
        return await self.run(self.store.update_status, session_id, status, owner=owner)

    async def update_attributes(
        self,
        session_id: str,
        changes: Mapping[str, JSON],
        *,
        remove: Sequence[str] = (),
        expected_version: int | None = None,
        owner: str | None = None,
    ) -> None:
        await self.run(
            self.store.update_attributes,
            session_id,
            changes,
            remove=remove,
            expected_version=expected_version,
            owner=owner,
        )

    async def append_context(
        self,
        session_id: str,
        messages: Sequence[JSON],
        *,
        expected_version: int | None = None,
        owner: str | None = None,
    ) -> Session:
        return await self.run(
            self.store.append_context,
            session_id,
            messages,
            expected_version=expected_version,
            owner=owner,
        )

    async def record_tool_call(
        self,
        session_id: str,
        tool_call_id: str,
        tool_name: str,
        input: JSON,
        output: JSON,
        duration_ms: int,
        *,
        owner: str | None = None,
        ttl_seconds: int | None = None,
    ) -> ToolCallRecord:
        return await self.run(
            self.store.record_tool_call,
            session_id,
            tool_call_id,
            tool_name,
            input,
            output,
            duration_ms,
            owner=owner,
            ttl_seconds=ttl_seconds,
        )

    async def tool_calls(
        self, session_id: str, *, owner: str | None = None
    ) -> AsyncIterator[ToolCallRecord]:
        """``async for record in await store.tool_calls(sid)``: the session is checked before this
        returns; later pages are read on a worker thread when the iteration reaches them."""
        return self._drain(await self.run(self.store.tool_calls, session_id, owner=owner))

    async def context(
        self, session_id: str, *, owner: str | None = None, after: int | None = None
    ) -> AsyncIterator[JSON]:
        """``async for message in await store.context(sid)``: the session is checked before this
        returns; pages are read on a worker thread when the iteration reaches them."""
        messages = await self.run(self.store.context, session_id, owner=owner, after=after)
        return self._drain(messages)

    async def _drain(self, items: Iterator[T]) -> AsyncIterator[T]:
        # next() may send a Query (a new page): never on the loop's thread. StopIteration
        # cannot cross a thread boundary, hence the sentinel.
        while True:  # bounded by the items: one pass over a finite iterator
            item = await self.run(next, items, _DONE)
            if item is _DONE:
                return
            yield item

    async def load(self, session_id: str, *, owner: str | None = None) -> Loaded:
        return await self.run(self.store.load, session_id, owner=owner)
