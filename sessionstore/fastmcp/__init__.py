"""FastMCP's session state in the store: an integration layer above the public core API.

Layer: like ``sessionstore.mcp``, this sits on ``AsyncSessionStore`` and nothing below it. Why it
exists: FastMCP keeps a session's state (``SessionProvider``'s ``create_session`` /
``end_session``, ``await get_session(session_id)``, an injected ``session: UserSession``,
``Session.get/set/delete/clear/end``) as one dict under one key of an ``AsyncKeyValue`` and
read-modify-writes the whole dict on every ``set``: two concurrent ``set``\\ s of different keys
on a shared store lose one of them, ``end`` racing a ``set`` brings the session back, and nothing
expires. The one line that moves it into the table::

    mcp = FastMCP("demo", session_state_store=StoreSessionState(store))

Tools written for FastMCP stay as they are. What changes behind them:

* each FastMCP session is a store session (owner: FastMCP's principal segment, the sha256 of the
  authenticated principal or ``anon``; id: the id ``create_session`` minted), and each state key
  one of its attributes. ``set`` and ``delete`` go **last writer wins per key**: one
  ``update_attributes`` naming that key alone, so concurrent writes of different keys all land,
  on one instance or many, with no read before (1 request: the transaction, nothing read back);
* ``get`` and the check behind ``get_session`` are one strongly consistent Query each;
* ``clear`` removes every key pinned to the version it read (a concurrent ``set`` makes it read
  again and retry), so it is atomic; ``end`` closes the session (``active -> closing -> closed``),
  after which every write is refused by its condition: the id never resolves again and nothing
  is written under it; DynamoDB deletes its items at its ttl;
* ``create_session`` opens the session with the store's absolute cap (``ttl_seconds``) and idle
  expiry (``idle_seconds``); an expired, ended, unknown or another principal's id is FastMCP's
  own ``InvalidSession`` ("Invalid or unknown session."). Resolving a session whose idle
  deadline is less than half a period away moves it (one ``touch``), so a session only read
  stays alive too;
* the injected per-user bucket (``session: UserSession``) is a store session of its own per
  principal, created by its first write, with ``user_ttl_seconds`` and no idle expiry; its
  ``end`` empties it (atomically, like ``clear``) so it stays usable, as in FastMCP.

How: FastMCP builds its ``Session`` objects itself, so the adapter cannot be reached below the
read-modify-write. Constructing a ``StoreSessionState`` installs, once per process, a dispatch
on ``fastmcp.server.sessions.Session``'s methods: a ``Session`` whose server was given a
``StoreSessionState`` is served by it; any other (another server in the same process, with
FastMCP's own store) runs FastMCP's own code unchanged. Every other use of the key-value store
(``ctx.set_state``, visibility rules) goes to ``other`` -- FastMCP's default in-memory store
unless given. Limits: a session's state takes at most ``ATTRIBUTES_MAX_BYTES`` (4 KiB,
``ItemTooLarge``); values are JSON (as FastMCP stores them); a key is any string (a key that is
not a plain name is kept under a digest of it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import random
import re
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, SupportsFloat, TypeVar

from fastmcp.server.sessions import InvalidSession, Session
from key_value.aio.protocols.key_value import AsyncKeyValue
from key_value.aio.stores.memory import MemoryStore
from pydantic_core import PydanticSerializationError, to_jsonable_python

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
    VersionConflict,
)
from ..models import Session as StoreSession
from ..models import Status
from ..store import SessionStore

__all__ = [
    "CLEAR_ATTEMPTS",
    "StoreSessionState",
    "attribute_name",
    "principal_owner",
    "store_session_id",
]

T = TypeVar("T")

#: How many times ``clear`` reads and retries against concurrent writes before it gives up
#: (``ConflictRetriesExhausted``); each retry is one Query and one transaction.
CLEAR_ATTEMPTS = 20
#: FastMCP's fixed id of the injected per-user bucket (``sessions._USER_SESSION_ID``).
_FASTMCP_USER_ID = "_user"
#: Store ids of per-user buckets; ``create_session`` mints uuid4s, which never look like this,
#: so an agent passing such an id as ``session_id`` is refused.
_USER_PREFIX = "user-"
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,62}\Z")
_KEY_PREFIXES = ("k.", "h.")
_HOOKED = ("_exists", "_create", "get", "set", "delete", "clear", "end")
_install_lock = threading.Lock()
_installed = False


def attribute_name(key: object) -> str:
    """The attribute holding FastMCP state key ``key``: ``k.<key>`` for a plain key (letters,
    digits, ``_.-``, up to 62), else ``h.`` and 60 hex digits of its sha256 -- an attribute name
    is at most 64 characters of a small alphabet, and the prefix keeps both apart from the
    store's reserved names. Session state is only ever read by key, so the name need not be
    reversible."""
    if not isinstance(key, str):
        raise InvalidInput(f"a session state key must be a string, not {type(key).__name__}")
    if _PLAIN_KEY.match(key):
        return "k." + key
    return "h." + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:60]


def principal_owner(principal: str | None) -> str:
    """The store owner of FastMCP principal ``principal``: FastMCP's own key segment (the sha256
    of the principal's JSON, or ``anon`` without auth), so isolation is exactly FastMCP's."""
    if principal is None:
        return "anon"
    return hashlib.sha256(principal.encode("utf-8", "surrogatepass")).hexdigest()


def store_session_id(session_id: str, owner: str) -> str:
    """The store id of FastMCP session ``session_id``: the id itself, or ``user-<owner>`` for
    the per-user bucket (store ids are one namespace; FastMCP's ``_user`` is per principal)."""
    return _USER_PREFIX + owner if session_id == _FASTMCP_USER_ID else session_id


class StoreSessionState:
    """An ``AsyncKeyValue`` for ``FastMCP(session_state_store=...)`` that keeps FastMCP's session
    state in the store (see the module docstring).

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
        for name, value in (("ttl_seconds", ttl_seconds), ("user_ttl_seconds", user_ttl_seconds)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"{name} must be a positive int, got {value!r}")
        if idle_seconds is not None and (
            isinstance(idle_seconds, bool)
            or not isinstance(idle_seconds, int)
            or not 1 <= idle_seconds <= ttl_seconds
        ):
            raise InvalidInput(
                f"idle_seconds must be None or an int in 1..ttl_seconds, got {idle_seconds!r}"
            )
        self.store = store
        self.ttl_seconds = ttl_seconds
        self.idle_seconds = idle_seconds
        self.user_ttl_seconds = user_ttl_seconds
        self.other: AsyncKeyValue = other if other is not None else MemoryStore()
        _install()

    # ------------------------------------------------------------------ FastMCP's Session

    async def session_exists(self, session: Session) -> bool:
        """``get_session``'s check: the session is the caller's, live and active (one Query; a
        ``touch`` too when less than half its idle period is left)."""
        owner, sid = _identity(session)
        if sid.startswith(_USER_PREFIX):
            return False  # a per-user bucket is never a SessionId session
        try:
            loaded = await self.store.load(sid, owner=owner)
        except (SessionNotFound, SessionExpired, InvalidInput):
            return False
        current = loaded.session
        if current.status is not Status.ACTIVE:
            return False
        await self._keep_alive(current, owner)
        return True

    async def session_create(self, session: Session) -> None:
        """``create_session``: a new store session, activated (2 requests)."""
        owner, sid = _identity(session)
        await self.store.create_session(
            sid, owner=owner, ttl_seconds=self.ttl_seconds, idle_seconds=self.idle_seconds
        )
        await self.store.activate(sid, owner=owner)

    async def session_get(self, session: Session, key: str, default: Any = None) -> Any:
        """One Query; the value as FastMCP would return it (its JSON form)."""
        name = attribute_name(key)
        attributes = await self._attributes(session)
        return attributes.get(name, default)

    async def session_set(self, session: Session, key: str, value: Any) -> None:
        """This key alone, last writer wins: one ``update_attributes`` (one transaction, nothing
        read back), with no read before on an instance that has seen the session."""
        name = attribute_name(key)
        await self._change(session, {name: _json(key, value)}, ())

    async def session_delete(self, session: Session, key: str) -> None:
        """This key alone removed, last writer wins (1 request, whether or not it was set)."""
        await self._change(session, {}, (attribute_name(key),))

    async def session_clear(self, session: Session) -> None:
        """Every key removed at once: pinned to the version read, read again on a conflict."""
        owner, sid = _identity(session)
        for attempt in range(CLEAR_ATTEMPTS):
            current = await self._open(session, owner, sid)
            if current is None:
                return  # a per-user bucket never written: nothing to clear
            names = [n for n in current.attributes if n.startswith(_KEY_PREFIXES)]
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
        """End it: ``closing`` then ``closed`` (2 requests); a closed session refuses every write,
        so a ``set`` racing the end either lands before it or raises ``InvalidSession``. A
        per-user bucket is emptied instead, so the principal can go on using it."""
        owner, sid = _identity(session)
        if sid.startswith(_USER_PREFIX):
            await self.session_clear(session)
            return
        try:
            await self.store.begin_close(sid, owner=owner)
        except InvalidTransition as exc:
            if exc.current is not Status.CLOSED:
                raise
            return  # ended already (by another request)
        except (SessionNotFound, SessionExpired) as exc:
            raise InvalidSession() from exc
        try:
            await self.store.close(sid, owner=owner)
        except (SessionNotFound, SessionExpired) as exc:
            raise InvalidSession() from exc

    # ------------------------------------------------------------------ helpers

    async def _attributes(self, session: Session) -> Mapping[str, Any]:
        owner, sid = _identity(session)
        current = await self._open(session, owner, sid)
        return {} if current is None else current.attributes

    async def _open(self, session: Session, owner: str, sid: str) -> StoreSession | None:
        """The session as read now (one Query); ``InvalidSession`` unless it is active -- None
        for a per-user bucket not written yet."""
        try:
            current = (await self.store.load(sid, owner=owner)).session
        except (SessionNotFound, InvalidInput) as exc:
            if sid.startswith(_USER_PREFIX):
                return None
            raise InvalidSession() from exc
        except SessionExpired as exc:
            raise InvalidSession() from exc
        if current.status is not Status.ACTIVE:
            raise InvalidSession()
        return current

    async def _change(
        self, session: Session, changes: Mapping[str, JSON], remove: Sequence[str]
    ) -> None:
        owner, sid = _identity(session)
        try:
            await self.store.update_attributes(sid, changes, remove=remove, owner=owner)
            return
        except SessionNotFound as exc:
            if not sid.startswith(_USER_PREFIX):
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
            await self.store.activate(sid, owner=owner)
        except SessionAlreadyExists:
            # Another request created it first: ours is then an ordinary change.
            await self.store.update_attributes(sid, changes, owner=owner)

    async def _keep_alive(self, current: StoreSession, owner: str) -> None:
        idle = current.idle_seconds
        if self.idle_seconds is None or idle is None or current.idle_until == 0:
            return
        now_s = self.store.clock.now_ms() // 1000
        if current.idle_until - now_s < idle / 2:
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
        raise RuntimeError(
            f"FastMCP session key {key[:40]!r}... reached the key-value store: this FastMCP's "
            "Session is not the one sessionstore.fastmcp was written for"
        )


def _identity(session: Session) -> tuple[str, str]:
    """(owner, store id) of a FastMCP ``Session``, from the fields FastMCP built it with."""
    owner = principal_owner(session._principal)
    return owner, store_session_id(session._session_id, owner)


def _json(key: str, value: Any) -> JSON:
    """``value`` in the JSON form FastMCP's own store keeps (pydantic's JSON mode)."""
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError as exc:
        raise InvalidInput(
            f"the value for session key {key!r:.80} is not JSON-serializable: {exc}"
        ) from exc


def _backing(session: Session) -> StoreSessionState | None:
    """The ``StoreSessionState`` behind ``session``'s server, if it has one: FastMCP hands each
    ``Session`` its server's ``PydanticAdapter``, which holds the key-value store it was given."""
    kv = getattr(getattr(session, "_store", None), "_key_value", None)
    return kv if isinstance(kv, StoreSessionState) else None


def _dispatch(name: str, original: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    ours = getattr(StoreSessionState, "session_" + name.lstrip("_"))

    @functools.wraps(original)
    async def method(self: Session, *args: Any, **kwargs: Any) -> T:
        state = _backing(self)
        if state is None:
            return await original(self, *args, **kwargs)
        result: T = await ours(state, self, *args, **kwargs)
        return result

    method.__sessionstore_original__ = original  # type: ignore[attr-defined]
    return method


def _install() -> None:
    """Put the dispatch on FastMCP's ``Session`` once per process (idempotent, thread-safe)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        missing = [name for name in _HOOKED if not callable(getattr(Session, name, None))]
        if missing:
            raise RuntimeError(f"fastmcp's Session lacks {missing}: unsupported FastMCP version")
        for name in _HOOKED:
            setattr(Session, name, _dispatch(name, getattr(Session, name)))
        _installed = True
