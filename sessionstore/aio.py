"""``AsyncSessionStore``: the store for asyncio code (MCP servers), without blocking the loop.

Needs anyio (the ``mcp`` extra). boto3 blocks its thread for each round trip (and each conflict
backoff), so each call runs the *same* ``SessionStore`` method on a worker thread: the semantics,
errors and request counts are the synchronous store's, with no second implementation of every
condition and retry (as an async client such as aioboto3 would need), for a thread hop of tens of
microseconds against a round trip of milliseconds. The threads are bounded by a limiter of our
own (``max_workers``), so a burst of store calls cannot starve other ``to_thread`` users (sync
MCP tools run there too) nor open unbounded connections.

Each coroutine is derived from the method it runs (``on_thread``): it has that method's name,
parameters, types and docstring, so the two cannot drift and no signature is written twice. A
method that returns an iterator returns an async iterator here (``iterating``), whose every next
item is taken on a worker thread too: a lazy reader's later pages are read there, not on the loop.

Cancellation waits for the worker: a write that has been sent is never abandoned half-way, so a
cancelled caller leaves the session exactly as a finished call would (the result is dropped).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from . import validate
from .clock import Clock
from .errors import InvalidInput
from .ids import IdFactory
from .store import Forward, SessionStore

__all__ = ["MAX_WORKERS", "AsyncSessionStore"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
#: Worker threads past this are a mistake: each blocks on one round trip at a time.
MAX_WORKERS = 1_024
#: What ``iterating`` adds to the docstring of the method it derives from.
ITERATING = """

        Here an async iterator, ``async for item in await astore.{name}(...)``: the call itself
        runs as the synchronous one does, and each next item is taken on a worker thread."""

_DONE = object()  # end of an iterator, passed back across the thread boundary


def on_thread(
    method: Callable[Concatenate[SessionStore, P], R],
) -> Callable[Concatenate[AsyncSessionStore, P], Coroutine[Any, Any, R]]:
    """``method`` of ``SessionStore`` as a coroutine of ``AsyncSessionStore``: ``await
    astore.name(...)`` runs ``astore.store.name(...)`` on one of its worker threads."""

    async def call(self: AsyncSessionStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        bound: Callable[P, R] = getattr(self.store, method.__name__)  # a subclass's own
        return await self.run(bound, *args, **kwargs)

    return _derived(call, method, inspect.signature(method))


def iterating(
    method: Callable[Concatenate[SessionStore, P], Iterator[T]],
) -> Callable[Concatenate[AsyncSessionStore, P], Coroutine[Any, Any, AsyncIterator[T]]]:
    """``on_thread`` for a method that returns an iterator: an async iterator of its items."""
    start = on_thread(method)

    async def call(
        self: AsyncSessionStore, /, *args: P.args, **kwargs: P.kwargs
    ) -> AsyncIterator[T]:
        return self._drain(await start(self, *args, **kwargs))

    signature = inspect.signature(method).replace(return_annotation="AsyncIterator")
    return _derived(call, method, signature, ITERATING.format(name=method.__name__))


def _derived(
    call: F, method: Callable[..., Any], signature: inspect.Signature, more: str = ""
) -> F:
    functools.update_wrapper(call, method, assigned=("__name__",))  # and __wrapped__ = method
    call.__qualname__ = f"AsyncSessionStore.{method.__name__}"
    call.__doc__ = (method.__doc__ or "") + more
    call.__signature__ = signature  # type: ignore[attr-defined]
    return call


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
    client = Forward[Any]("store.client")
    table_name = Forward[str]("store.table_name")
    clock = Forward[Clock]("store.clock")
    ids = Forward[IdFactory]("store.ids")
    item_size_limit = Forward[int]("store.item_size_limit")

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run any blocking ``fn(*args, **kwargs)`` on this store's bounded worker threads."""
        try:
            limiter = self._limiter.get()
        except LookupError:
            limiter = anyio.CapacityLimiter(self.max_workers)
            self._limiter.set(limiter)
        return await anyio.to_thread.run_sync(
            functools.partial(fn, *args, **kwargs), limiter=limiter
        )

    async def _drain(self, items: Iterator[T]) -> AsyncIterator[T]:
        # next() may send a Query (a new page): never on the loop's thread. StopIteration
        # cannot cross a thread boundary, hence the sentinel.
        while True:  # bounded by the items: one pass over a finite iterator
            item = await self.run(next, items, _DONE)
            if item is _DONE:
                return
            yield item

    create_table = on_thread(SessionStore.create_table)
    create_session = on_thread(SessionStore.create_session)
    get_session = on_thread(SessionStore.get_session)
    touch = on_thread(SessionStore.touch)
    transition = on_thread(SessionStore.transition)
    activate = on_thread(SessionStore.activate)
    begin_close = on_thread(SessionStore.begin_close)
    close = on_thread(SessionStore.close)
    close_and_expire = on_thread(SessionStore.close_and_expire)
    update_status = on_thread(SessionStore.update_status)
    update_attributes = on_thread(SessionStore.update_attributes)
    append_context = on_thread(SessionStore.append_context)
    record_tool_call = on_thread(SessionStore.record_tool_call)
    tool_calls = iterating(SessionStore.tool_calls)
    context = iterating(SessionStore.context)
    load = on_thread(SessionStore.load)
