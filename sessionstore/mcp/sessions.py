"""One session model for every way a client opens, uses and ends a session.

The extension's two methods, its two tools and the legacy ``Mcp-Session-Id`` layer
(``http_sessions``) all open, check and end sessions here, so a session is the same item with
the same owner and deadlines whichever way it came in. ``SessionLifecycle`` is a mixin of
``SessionStoreExtension`` (``middleware``), which validates and sets the attributes it declares:
the interceptor checks sessions with these same reads and shares the ttl cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from pydantic import Field

from ..aio import AsyncSessionStore
from ..codec import JSON
from ..errors import (
    InvalidInput,
    InvalidTransition,
    ItemTooLarge,
    SessionNotActive,
    SessionStoreError,
)
from ..ids import validate_id
from ..models import Session, Status
from .mcp_errors import required_session_id, to_mcp_error
from .protocol import (
    CloseSessionResult,
    OpenedSession,
    OpenSessionParams,
    OpenSessionResult,
    SessionHandle,
)
from .tool_session import CURRENT_SESSION, ToolSession, current_session

T = TypeVar("T")

_TTL_CACHE_SIZE = 10_000
#: A session's default idle timeout: the SDK's own for its in-memory sessions
#: (``mcp.server.streamable_http_manager.DEFAULT_SESSION_IDLE_TIMEOUT``, 30 minutes).
DEFAULT_IDLE_SECONDS = 30 * 60

# ``SessionLifecycle`` is part of ``SessionStoreExtension``: it logs under the extension's name.
logger = logging.getLogger("sessionstore.mcp.middleware")


def principal_owner() -> str | None:
    """The session owner for the authenticated principal of this request, or None.

    The SDK's own identity triple (``principal_components``: client id, issuer, subject). A bare
    client id that is a valid store id is used as it is (readable in the table); anything else
    is hashed to a fixed-width id, since the owner ends up in condition values and policies.
    """
    token = get_access_token()
    if token is None:
        return None
    client_id, issuer, subject = principal_components(token)
    if issuer is None and subject is None:
        try:
            return validate_id(client_id, "owner")
        except InvalidInput:
            pass
    digest = hashlib.sha256(json.dumps([client_id, issuer, subject]).encode()).hexdigest()
    return f"p-{digest[:40]}"


async def _as_mcp(call: Awaitable[T], session_id: str | None = None) -> T:
    """What ``call`` returns, our errors raised as MCP errors."""
    try:
        return await call
    except SessionStoreError as exc:
        raise to_mcp_error(exc, session_id) from exc


def needs_touch(session: Session, now_s: int) -> bool:
    """A read-only request should move the idle deadline on: the session is an idle one, less
    than half its idle period is left, and moving it would keep the session longer (the
    deadline is still before the cap)."""
    idle = session.idle_seconds
    return (
        idle is not None
        and session.idle_until < session.ttl
        and 2 * (session.idle_until - now_s) < idle
    )


class SessionLifecycle:
    """Sessions opened, checked and ended in the store, and the methods and tools for them."""

    store: AsyncSessionStore
    default_ttl_seconds: int
    max_ttl_seconds: int
    idle_seconds: int | None
    # A session's ttl never changes once created, so one read per session per instance
    # (the claim's condition compares it, so a stale entry costs a retry, never a claim
    # that expires with another session).
    _ttls: OrderedDict[tuple[str, str | None], int]

    async def open_session(
        self,
        *,
        ttl_seconds: int | None = None,
        session_id: str | None = None,
        attributes: dict[str, JSON] | None = None,
    ) -> Session:
        """Create and activate a session for the current principal (two writes). It expires
        after ``ttl_seconds`` in any case, and after ``idle_seconds`` without a write."""
        ttl_seconds = ttl_seconds or self.default_ttl_seconds
        if not 0 < ttl_seconds <= self.max_ttl_seconds:
            raise InvalidInput(f"ttlSeconds must be in 1..{self.max_ttl_seconds}")
        # An idle period as long as the cap changes nothing: a fixed-ttl session.
        idle_seconds = self.idle_seconds
        if idle_seconds is not None and idle_seconds >= ttl_seconds:
            idle_seconds = None
        owner = principal_owner()
        kept = {k: v for k, v in (attributes or {}).items() if v is not None}

        async def create() -> Session:
            return await self.store.run(
                self.store.store.create_session,
                session_id,
                owner=owner,
                ttl_seconds=ttl_seconds,
                idle_seconds=idle_seconds,
                attributes=kept,
            )

        try:
            created = await create()
        except ItemTooLarge:
            # A client's capabilities can be large; its name and version always fit.
            kept.pop("clientCapabilities", None)
            created = await create()
        session = await self.store.activate(created.session_id, owner=owner)
        self._remember(session.session_id, owner, session.ttl)
        return session

    async def finish_opening(self, session_id: str) -> Session:
        """Activate a session of the current principal that was created but never activated
        (its opening stopped between ``open_session``'s two writes); an active one is returned
        as it is (one UpdateItem either way)."""
        owner = principal_owner()
        session = await self.store.activate(session_id, owner=owner)
        self._remember(session.session_id, owner, session.ttl)
        return session

    async def session_for_request(self, session_id: str) -> Session:
        """The live, active session of the current principal (one consistent read). An idle
        session with less than half its idle period left is also touched (one UpdateItem), so
        a client that only reads keeps it alive at one write per half idle period at most."""
        owner = principal_owner()
        session = await self.store.get_session(session_id, owner=owner)
        if session.status is not Status.ACTIVE:
            raise SessionNotActive(session_id, session.status)
        if needs_touch(session, self.store.clock.now_ms() // 1000):
            session = await self.store.touch(session_id, owner=owner)
        self._remember(session_id, owner, session.ttl)
        return session

    async def end_session(self, session_id: str, *, quiet: bool = False) -> Session:
        """closing -> closed; closing a closed session again is a success."""
        owner = principal_owner()
        try:
            try:
                await self.store.begin_close(session_id, owner=owner)
            except InvalidTransition as exc:
                if exc.current is not Status.CLOSED:
                    raise
            return await self.store.close(session_id, owner=owner)
        except SessionStoreError:
            if quiet:
                logger.warning("session %s could not be closed", session_id, exc_info=True)
            raise

    async def _session_ttl(self, session_id: str, owner: str | None) -> int:
        ttl = self._ttls.get((session_id, owner))
        # Past its ttl the id may name a new session (re-created after TTL removed the old).
        if ttl is None or ttl <= self.store.clock.now_ms() // 1000:
            ttl = (await self.store.get_session(session_id, owner=owner)).ttl
            self._remember(session_id, owner, ttl)
        return ttl

    def _remember(self, session_id: str, owner: str | None, ttl: int) -> None:
        self._ttls[(session_id, owner)] = ttl
        self._ttls.move_to_end((session_id, owner))
        while len(self._ttls) > _TTL_CACHE_SIZE:
            self._ttls.popitem(last=False)

    # ------------------------------------------------------------------ lifecycle methods

    async def _open(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        assert isinstance(params, OpenSessionParams)
        session = await _as_mcp(self.open_session(ttl_seconds=params.ttl_seconds))
        return OpenSessionResult(
            session_id=session.session_id, status=session.status.value, expires_at=session.ttl
        )

    async def _close(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        session_id = required_session_id(params.meta if params is not None else None)
        session = await _as_mcp(self.end_session(session_id), session_id)
        return CloseSessionResult(session_id=session_id, status=session.status.value)

    def _open_tool_fn(self) -> Any:
        async def open_session(
            ttl_seconds: Annotated[int | None, Field(ge=1)] = None,
        ) -> OpenedSession:
            """Open a session: pass the session_id it returns to every tool that takes one,
            and close it with close_session when done. It expires at expires_at (epoch
            seconds) in any case."""
            session = await _as_mcp(self.open_session(ttl_seconds=ttl_seconds))
            return OpenedSession(
                session_id=session.session_id, status=session.status.value, expires_at=session.ttl
            )

        return open_session

    def _close_tool_fn(self) -> Any:
        async def close_session(session_id: SessionHandle = None) -> OpenedSession:
            """Close the session: later calls with its session_id are refused."""
            current = current_session()  # the interceptor resolved and checked it
            session = await _as_mcp(self.end_session(current.session_id), current.session_id)
            return OpenedSession(
                session_id=session.session_id, status=session.status.value, expires_at=session.ttl
            )

        return close_session

    async def _serve_close(
        self,
        session_id: str,
        owner: str | None,
        legacy: Session | None,
        name: str,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        # Closing is a lifecycle step, not a call in the session's history.
        if legacy is None:
            await _as_mcp(self.store.get_session(session_id, owner=owner), session_id)
        view = ToolSession(session_id, owner, "", name, self.store)
        token = CURRENT_SESSION.set(view)
        try:
            return await call_next(ctx)
        finally:
            CURRENT_SESSION.reset(token)
