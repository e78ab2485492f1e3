"""A tool's own session, reached without a parameter for it.

The SDK calls a tool with the arguments the client sent and nothing else, so the extension
hands the session over in a context variable, around each tool it runs (``calls``). Apart from
the extension because this is all a tool's own code needs of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ..aio import AsyncSessionStore
from ..codec import JSON
from ..models import Session, ToolCallRecord


@dataclass(frozen=True)
class ToolSession:
    """What a tool sees of its session, from ``current_session()``."""

    session_id: str
    owner: str | None
    tool_call_id: str
    tool_name: str
    store: AsyncSessionStore

    async def append(self, *messages: JSON) -> Session:
        """Append to the session's context (atomic, concurrent appends all land)."""
        return await self.store.append_context(self.session_id, list(messages), owner=self.owner)

    async def get(self) -> Session:
        return await self.store.get_session(self.session_id, owner=self.owner)

    async def context(self) -> list[JSON]:
        """Every message of the session's context so far, in order."""
        return [m async for m in await self.store.context(self.session_id, owner=self.owner)]

    async def history(self) -> list[ToolCallRecord]:
        """The calls recorded so far, in order (this one is recorded after the tool returns)."""
        return [r async for r in await self.store.tool_calls(self.session_id, owner=self.owner)]


class NoToolSession(RuntimeError):
    """``current_session()`` was called outside a tool call served by the extension."""


#: Set by the interceptor around each tool it runs; read only through ``current_session()``.
CURRENT_SESSION: ContextVar[ToolSession | None] = ContextVar(
    "sessionstore_tool_session", default=None
)


@contextmanager
def as_current(session: ToolSession) -> Iterator[None]:
    """``session`` is ``current_session()`` for the code run inside."""
    token = CURRENT_SESSION.set(session)
    try:
        yield
    finally:
        CURRENT_SESSION.reset(token)


def current_session() -> ToolSession:
    """The session of the tool call being executed (set by the interceptor, a context variable,
    so it follows the call into sync tools run on worker threads too)."""
    session = CURRENT_SESSION.get()
    if session is None:
        raise NoToolSession("no store-backed session: is SessionStoreExtension installed?")
    return session
