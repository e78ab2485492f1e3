"""``StoreSessionState``: FastMCP's session state in the store, each FastMCP session a store one.

What it does with each ``Session`` operation, and what each costs, is in the package docstring
(``sessionstore.fastmcp``); in short: a ``set`` or ``delete`` is one ``update_attributes`` of
that key alone (one request, the transaction, nothing read back), a ``get`` one Query, a
``clear`` one Query and one transaction pinned to the version read, an ``end`` two requests
(``closing``, then ``close_and_expire``'s transaction) -- three on an instance that has not read
the session's state, which ``begin_close`` reads back.
Everything else FastMCP keeps in its key-value store (``ctx.set_state``, visibility rules) is
passed through to ``other``.

Layer: like ``sessionstore.mcp``, this sits on ``AsyncSessionStore`` and nothing below it, so
every guarantee it gives is one the public API gives (last writer wins per name, versions,
``closed`` refusing writes, expiry). It is a ``dispatch.SessionHandler``: constructing one
installs the dispatch, and FastMCP's ``Session`` methods then arrive here; the mapping of
FastMCP's principals, ids and keys to the store's is ``names``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Mapping, Sequence
from typing import Any, SupportsFloat

from fastmcp.server.sessions import InvalidSession, Session
from key_value.aio.protocols.key_value import AsyncKeyValue
from key_value.aio.stores.memory import MemoryStore
from pydantic_core import PydanticSerializationError, to_jsonable_python

from .. import validate
from ..aio import AsyncSessionStore
from ..codec import JSON
from ..errors import (
    ConflictRetriesExhausted,
    InvalidInput,
    InvalidTransition,
    SessionAlreadyExists,
    SessionExpired,
    SessionNotActive,
    SessionNotFound,
    Unavailable,
    VersionConflict,
)
from ..models import Session as StoreSession
from ..models import Status
from ..store import SessionStore
from .dispatch import SessionHandler, bypassed, install
from .names import KEY_PREFIXES, USER_PREFIX, attribute_name, identity

__all__ = ["CLEAR_ATTEMPTS", "ENDED_TTL_SECONDS", "StoreSessionState", "idle_slack", "stored_idle"]

#: How many times ``clear`` reads and retries against concurrent writes before it gives up
#: (``ConflictRetriesExhausted``); each retry is one Query and one transaction.
CLEAR_ATTEMPTS = 20
#: The most an ended session's items -- the closed metadata item and the state item -- stay
#: before their ttl: meanwhile a racing ``set`` or ``end`` finds the session closed.
ENDED_TTL_SECONDS = 60


def idle_slack(idle_seconds: int) -> int:
    """How much later than ``idle_seconds`` after its last use a session left alone may
    expire: half the idle period, rounded up (at least 1 s)."""
    return max(1, -(-idle_seconds // 2))


def stored_idle(idle_seconds: int) -> int:
    """The idle period the store keeps for a FastMCP session of ``idle_seconds``: longer by
    ``idle_slack``. The store counts idle deadlines in whole seconds from the second of the
    last write (a deadline kept so is up to 1 s short), and a read moves it only when it is
    near (``_keep_alive``); with the slack, every use leaves at least ``idle_seconds`` -- a
    session used once per idle period never expires before its cap -- and a read-only session
    is touched at most about once per slack."""
    return idle_seconds + idle_slack(idle_seconds)


class StoreSessionState(SessionHandler):
    """An ``AsyncKeyValue`` for ``FastMCP(session_state_store=...)`` that keeps FastMCP's session
    state in the store (see the ``sessionstore.fastmcp`` docstring).

    ``store``: an ``AsyncSessionStore`` (or a ``SessionStore``, wrapped); ``ttl_seconds`` and
    ``idle_seconds``: each session's absolute cap and idle expiry (None: the cap alone);
    ``user_ttl_seconds``: the cap of a per-user bucket; ``other``: the key-value store for the
    rest of FastMCP's state (default: FastMCP's own in-memory store).
    """

    def __init__(
        self,
        store: AsyncSessionStore | SessionStore,
        *,
        ttl_seconds: int = 86400,
        idle_seconds: int | None = 3600,
        user_ttl_seconds: int = 365 * 86400,
        other: AsyncKeyValue | None = None,
    ) -> None:
        if isinstance(store, SessionStore):
            store = AsyncSessionStore(store)
        if not isinstance(store, AsyncSessionStore):
            raise InvalidInput(
                f"store must be an AsyncSessionStore or SessionStore, not {type(store).__name__}"
            )
        validate.ttl(ttl_seconds, idle_seconds)
        validate.ttl(user_ttl_seconds, name="user_ttl_seconds")
        self.store = store
        self.ttl_seconds = ttl_seconds
        self.idle_seconds = idle_seconds
        self.user_ttl_seconds = user_ttl_seconds
        self.other: AsyncKeyValue = other if other is not None else MemoryStore()
        install()

    # ------------------------------------------------------------------ FastMCP's Session

    async def session_exists(self, session: Session) -> bool:
        """``get_session``'s check: the session is the caller's, live and active (one Query; a
        ``touch`` too when no more than its idle period is left: ``_keep_alive``)."""
        owner, sid = identity(session)
        if sid.startswith(USER_PREFIX):
            return False  # a per-user bucket is never a SessionId session
        try:
            await self._open(owner, sid)
        except InvalidSession:
            return False
        return True

    async def session_create(self, session: Session) -> None:
        """``create_session``: a new store session, activated (2 requests); its stored idle
        period is ``stored_idle``'s."""
        owner, sid = identity(session)
        idle = self.idle_seconds
        if idle is not None:  # the slack past the cap would change nothing: the cap
            idle = min(stored_idle(idle), self.ttl_seconds)
        await self.store.create_session(
            sid, owner=owner, ttl_seconds=self.ttl_seconds, idle_seconds=idle
        )
        await self.store.activate(sid, owner=owner)

    async def session_get(self, session: Session, key: str, default: Any = None) -> Any:
        """One Query; the value as FastMCP would return it (its JSON form)."""
        name = attribute_name(key)
        attributes = await self._attributes(session)
        return attributes.get(name, default)

    async def session_set(self, session: Session, key: str, value: Any) -> None:
        """This key alone, last writer wins: one ``update_attributes``, so one request, the
        transaction (now and then two: see the package docstring); nothing is read back, nor
        read before on an instance that has seen the session."""
        name = attribute_name(key)
        await self._change(session, {name: _json(key, value)}, ())

    async def session_delete(self, session: Session, key: str) -> None:
        """This key alone removed, last writer wins: one ``update_attributes``, one request (the
        transaction), whether or not the key was set."""
        await self._change(session, {}, (attribute_name(key),))

    async def session_clear(self, session: Session) -> None:
        """Every key removed at once: pinned to the version read, read again on a conflict."""
        owner, sid = identity(session)
        for attempt in range(CLEAR_ATTEMPTS):
            current = await self._open(owner, sid)
            if current is None:
                return  # a per-user bucket never written: nothing to clear
            names = [n for n in current.attributes if n.startswith(KEY_PREFIXES)]
            if not names:
                return  # empty when read: this clear takes effect there
            try:
                await self.store.update_attributes(
                    sid, {}, remove=names, expected_version=current.version, owner=owner
                )
                return
            except VersionConflict as exc:
                last = exc
            except (SessionNotFound, SessionExpired, SessionNotActive) as exc:
                raise InvalidSession() from exc
            # Full jitter, bounded: the writers that beat us are other requests of this session.
            await asyncio.sleep(random.uniform(0, min(0.2, 0.005 * 2**attempt)))
        raise ConflictRetriesExhausted(sid, last.expected, last.current, CLEAR_ATTEMPTS)

    async def session_end(self, session: Session) -> None:
        """End it: ``closing``, then ``closed`` with the ttl of its items (metadata and state)
        at most ``ENDED_TTL_SECONDS`` away (2 requests: an UpdateItem, then
        ``close_and_expire``'s transaction; and a GetItem between them on an instance without
        the session's state, which ``begin_close`` reads back with it). A closed session
        refuses every write, so a ``set`` racing the end either lands before it or raises
        ``InvalidSession``. A per-user bucket is emptied instead, so the principal can go on
        using it."""
        owner, sid = identity(session)
        if sid.startswith(USER_PREFIX):
            await self.session_clear(session)
            return
        try:
            closing = await self.store.begin_close(sid, owner=owner)
        except InvalidTransition as exc:
            if exc.current is not Status.CLOSED:
                raise
            return  # ended already (by another request)
        except (SessionNotFound, SessionExpired) as exc:
            raise InvalidSession() from exc
        now_s = self.store.clock.now_ms() // 1000
        expire_at = min(closing.ttl, now_s + ENDED_TTL_SECONDS)
        try:
            await self.store.close_and_expire(sid, owner=owner, expire_at=expire_at)
        except (SessionNotFound, SessionExpired) as exc:
            raise InvalidSession() from exc

    # ------------------------------------------------------------------ helpers

    async def _attributes(self, session: Session) -> Mapping[str, Any]:
        owner, sid = identity(session)
        current = await self._open(owner, sid)
        return {} if current is None else current.attributes

    async def _open(self, owner: str, sid: str) -> StoreSession | None:
        """The session as read now (one Query); ``InvalidSession`` unless it is active -- None
        for a per-user bucket not written yet. A bucket still ``initializing`` (its first write
        was interrupted before the activation, or raced another first write) is activated
        here, once: one UpdateItem, a no-op success if another request did it first."""
        try:
            current = (await self.store.load(sid, owner=owner)).session
        except (SessionNotFound, InvalidInput) as exc:
            if sid.startswith(USER_PREFIX):
                return None
            raise InvalidSession() from exc
        except SessionExpired as exc:
            raise InvalidSession() from exc
        if current.status is Status.INITIALIZING and sid.startswith(USER_PREFIX):
            try:
                current = await self.store.activate(sid, owner=owner)
            except (SessionNotFound, SessionExpired, InvalidTransition) as exc:
                raise InvalidSession() from exc
        if current.status is not Status.ACTIVE:
            raise InvalidSession()
        await self._keep_alive(current, owner)
        return current

    async def _change(
        self, session: Session, changes: Mapping[str, JSON], remove: Sequence[str]
    ) -> None:
        owner, sid = identity(session)
        try:
            await self.store.update_attributes(sid, changes, remove=remove, owner=owner)
            return
        except SessionNotFound as exc:
            if not sid.startswith(USER_PREFIX):
                raise InvalidSession() from exc
        except (SessionExpired, SessionNotActive) as exc:
            raise InvalidSession() from exc
        # A per-user bucket's first write creates it (with that write in it).
        if not changes:
            return  # removing from a bucket that does not exist: nothing to do
        try:
            await self.store.create_session(
                sid, owner=owner, ttl_seconds=self.user_ttl_seconds, attributes=changes
            )
        except SessionAlreadyExists:
            # Another request created it first: ours is then an ordinary change.
            await self.store.update_attributes(sid, changes, owner=owner)
            return
        # This write has landed: an activation that fails now is finished by the next read
        # (``_open``), so it must not report the write as failed.
        with contextlib.suppress(Unavailable):
            await self.store.activate(sid, owner=owner)

    async def _keep_alive(self, current: StoreSession, owner: str) -> None:
        """Touch the session (one UpdateItem) if no more than ``idle_seconds`` of its idle
        period is left, by the millisecond: after any use, at least ``idle_seconds`` are left.
        Its stored period is longer by ``stored_idle``'s slack, so touches come at most about
        once per slack."""
        if self.idle_seconds is None or current.idle_seconds is None:
            return
        if current.idle_until >= current.ttl:
            return  # the cap comes first: moving the deadline keeps it no longer
        left_ms = current.idle_until * 1000 - self.store.clock.now_ms()
        if left_ms <= self.idle_seconds * 1000:
            # Ended or expired meanwhile: the next request finds it so.
            with contextlib.suppress(SessionNotFound, SessionExpired):
                await self.store.touch(current.session_id, owner=owner)

    # ------------------------------------------------------------------ AsyncKeyValue

    async def get(self, key: str, *, collection: str | None = None) -> dict[str, Any] | None:
        _not_session(key, collection)
        return await self.other.get(key, collection=collection)

    async def ttl(
        self, key: str, *, collection: str | None = None
    ) -> tuple[dict[str, Any] | None, float | None]:
        _not_session(key, collection)
        return await self.other.ttl(key, collection=collection)

    async def put(
        self,
        key: str,
        value: Mapping[str, Any],
        *,
        collection: str | None = None,
        ttl: SupportsFloat | None = None,
    ) -> None:
        _not_session(key, collection)
        await self.other.put(key, value, collection=collection, ttl=ttl)

    async def delete(self, key: str, *, collection: str | None = None) -> bool:
        _not_session(key, collection)
        return await self.other.delete(key, collection=collection)

    async def get_many(
        self, keys: Sequence[str], *, collection: str | None = None
    ) -> list[dict[str, Any] | None]:
        for key in keys:
            _not_session(key, collection)
        return await self.other.get_many(keys, collection=collection)

    async def ttl_many(
        self, keys: Sequence[str], *, collection: str | None = None
    ) -> list[tuple[dict[str, Any] | None, float | None]]:
        for key in keys:
            _not_session(key, collection)
        return await self.other.ttl_many(keys, collection=collection)

    async def put_many(
        self,
        keys: Sequence[str],
        values: Sequence[Mapping[str, Any]],
        *,
        collection: str | None = None,
        ttl: SupportsFloat | None = None,
    ) -> None:
        for key in keys:
            _not_session(key, collection)
        await self.other.put_many(keys, values, collection=collection, ttl=ttl)

    async def delete_many(self, keys: Sequence[str], *, collection: str | None = None) -> int:
        for key in keys:
            _not_session(key, collection)
        return await self.other.delete_many(keys, collection=collection)


def _not_session(key: str, collection: str | None) -> None:
    """FastMCP's session keys never reach the key-value methods while the dispatch is installed;
    if one does (a FastMCP whose ``Session`` changed), refuse rather than race in ``other``."""
    if collection == "fastmcp_state" and key.startswith("session:"):
        raise bypassed(key)


def _json(key: str, value: Any) -> JSON:
    """``value`` in the JSON form FastMCP's own store keeps (pydantic's JSON mode)."""
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError as exc:
        raise InvalidInput(
            f"the value for session key {key!r:.80} is not JSON-serializable: {exc}"
        ) from exc
