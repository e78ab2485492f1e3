"""One session model for every way a client opens, uses and ends a session.

MCP layer, over the store's public API. ``Sessions`` is what the extension's two methods, its two
tools, its ``tools/call`` interceptor and the legacy ``Mcp-Session-Id`` layer (``http_sessions``)
open, check and end sessions with, so a session is the same item with the same owner and
deadlines whichever way it came in. It also keeps each session's ttl, which a claim names in its
condition (``calls``), so a claim costs no read of it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from dataclasses import dataclass, field

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components

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

_TTL_CACHE_SIZE = 10_000
#: A session's default idle timeout: the SDK's own for its in-memory sessions
#: (``mcp.server.streamable_http_manager.DEFAULT_SESSION_IDLE_TIMEOUT``, 30 minutes).
DEFAULT_IDLE_SECONDS = 30 * 60

# The extension's parts log under its name, so one logger configures all of it.
logger = logging.getLogger("sessionstore.mcp.extension")


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


@dataclass(frozen=True)
class Sessions:
    """The current principal's sessions in ``store``: opened, checked and ended.

    ``default_ttl_seconds`` / ``max_ttl_seconds`` bound what a session may ask for: its absolute
    cap. ``idle_seconds``: a session also expires after this long without a request that wrote
    to it (None: only the cap). Raises the store's errors; the MCP surfaces translate them.
    """

    store: AsyncSessionStore
    default_ttl_seconds: int
    max_ttl_seconds: int
    idle_seconds: int | None
    # A session's ttl never changes once created, so one read per session per instance
    # (the claim's condition compares it, so a stale entry costs a retry, never a claim
    # that expires with another session).
    _ttls: OrderedDict[tuple[str, str | None], int] = field(
        default_factory=OrderedDict, init=False, repr=False
    )

    async def open(
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
        self.remember(session.session_id, owner, session.ttl)
        return session

    async def finish_opening(self, session_id: str) -> Session:
        """Activate a session of the current principal that was created but never activated
        (its opening stopped between ``open``'s two writes); an active one is returned as it
        is (one UpdateItem either way)."""
        owner = principal_owner()
        session = await self.store.activate(session_id, owner=owner)
        self.remember(session.session_id, owner, session.ttl)
        return session

    async def for_request(self, session_id: str) -> Session:
        """The live, active session of the current principal (one consistent read). An idle
        session with less than half its idle period left is also touched (one UpdateItem), so
        a client that only reads keeps it alive at one write per half idle period at most."""
        owner = principal_owner()
        session = await self.store.get_session(session_id, owner=owner)
        if session.status is not Status.ACTIVE:
            raise SessionNotActive(session_id, session.status)
        if needs_touch(session, self.store.clock.now_ms() // 1000):
            session = await self.store.touch(session_id, owner=owner)
        self.remember(session_id, owner, session.ttl)
        return session

    async def end(self, session_id: str, *, quiet: bool = False) -> Session:
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

    async def ttl(self, session_id: str, owner: str | None) -> int:
        """The session's ttl: remembered, else read (one consistent read)."""
        ttl = self._ttls.get((session_id, owner))
        # Past its ttl the id may name a new session (re-created after TTL removed the old).
        if ttl is None or ttl <= self.store.clock.now_ms() // 1000:
            ttl = (await self.store.get_session(session_id, owner=owner)).ttl
            self.remember(session_id, owner, ttl)
        return ttl

    def remember(self, session_id: str, owner: str | None, ttl: int) -> None:
        """The session's ttl as a write or read of this request found it."""
        self._ttls[(session_id, owner)] = ttl
        self._ttls.move_to_end((session_id, owner))
        while len(self._ttls) > _TTL_CACHE_SIZE:
            self._ttls.popitem(last=False)
