"""The hook on FastMCP's ``Session``: its methods served by the server's own state store.

FastMCP builds its ``Session`` objects itself (``get_session``, the injected ``UserSession``,
``SessionProvider``'s tools) and gives each one its server's key-value store, wrapped in a
``PydanticAdapter``. Its methods read-modify-write one dict under one key, and no store passed
to ``FastMCP(session_state_store=...)`` is ever reached below that. So ``install`` replaces,
once per process, the methods in ``HOOKED`` with a dispatch: a ``Session`` whose server's store
is a ``SessionHandler`` is served by the handler's ``session_*`` method; any other (another
server in the same process, with FastMCP's own store) runs FastMCP's own code unchanged. The
original method stays on each wrapper as ``__sessionstore_original__``.

This module sits between FastMCP and ``state``: it knows FastMCP's ``Session`` and the
``SessionHandler`` contract, not the store, so what serves a session (``StoreSessionState``)
is written against the store's public API alone and never patches anything itself.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

from fastmcp.server.sessions import Session

__all__ = ["HOOKED", "TESTED", "SessionHandler", "bypassed", "install"]

T = TypeVar("T")

#: FastMCP's ``Session`` method -> the ``SessionHandler`` method that serves it.
HOOKED = {
    "_exists": "session_exists",
    "_create": "session_create",
    "get": "session_get",
    "set": "session_set",
    "delete": "session_delete",
    "clear": "session_clear",
    "end": "session_end",
}
#: The FastMCP releases this hook was written and tested against (the ``fastmcp`` extra's pin).
TESTED = ((4, 2, 3), (4, 3, 0))
_TESTED_SPEC = "fastmcp>=4.2.3,<4.3"  # ``TESTED``, as the requirement that pins it
_install_lock = threading.Lock()
_installed = False


class SessionHandler:
    """A key-value store for ``FastMCP(session_state_store=...)`` that serves FastMCP's
    ``Session`` methods itself: each ``session_*`` method takes the ``Session`` and the
    arguments of the method it replaces (``HOOKED``), and returns what that method returns."""

    async def session_exists(self, session: Session) -> bool:
        raise NotImplementedError

    async def session_create(self, session: Session) -> None:
        raise NotImplementedError

    async def session_get(self, session: Session, key: str, default: Any = None) -> Any:
        raise NotImplementedError

    async def session_set(self, session: Session, key: str, value: Any) -> None:
        raise NotImplementedError

    async def session_delete(self, session: Session, key: str) -> None:
        raise NotImplementedError

    async def session_clear(self, session: Session) -> None:
        raise NotImplementedError

    async def session_end(self, session: Session) -> None:
        raise NotImplementedError


def _handler(session: Session) -> SessionHandler | None:
    """The ``SessionHandler`` behind ``session``'s server, if it has one: FastMCP hands each
    ``Session`` its server's ``PydanticAdapter``, which holds the key-value store it was given."""
    kv = getattr(getattr(session, "_store", None), "_key_value", None)
    return kv if isinstance(kv, SessionHandler) else None


def _dispatch(served_by: str, original: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    @functools.wraps(original)
    async def method(self: Session, *args: Any, **kwargs: Any) -> T:
        handler = _handler(self)
        if handler is None:
            return await original(self, *args, **kwargs)
        result: T = await getattr(handler, served_by)(self, *args, **kwargs)
        return result

    method.__sessionstore_original__ = original  # type: ignore[attr-defined]
    return method


def install() -> None:
    """Put the dispatch on FastMCP's ``Session`` once per process (idempotent, thread-safe);
    ``RuntimeError`` if this FastMCP's ``Session`` lacks a method in ``HOOKED``."""
    global _installed
    with _install_lock:
        if _installed:
            return
        missing = [name for name in HOOKED if not callable(getattr(Session, name, None))]
        if missing:
            raise RuntimeError(
                f"FastMCP {fastmcp_version()}'s Session lacks {missing}: sessionstore.fastmcp "
                f"was tested with {_TESTED_SPEC}"
            )
        for name, served_by in HOOKED.items():
            setattr(Session, name, _dispatch(served_by, getattr(Session, name)))
        _installed = True


def fastmcp_version() -> str:
    """The installed FastMCP's version, as its package metadata gives it."""
    try:
        return version("fastmcp")
    except PackageNotFoundError:
        return "unknown"


def is_tested(release: str) -> bool:
    """Whether ``release`` (``4.2.3``, ``4.2.10rc1`` ...) lies in ``TESTED``."""
    parts = [int(n) for n in re.findall(r"\d+", release)[:3]]
    if len(parts) < 3:
        return False
    low, high = TESTED
    return low <= (parts[0], parts[1], parts[2]) < high


def bypassed(key: str) -> RuntimeError:
    """The error for a FastMCP session key that reached the key-value store itself: a call
    that went around the hooked ``Session`` methods. On a tested FastMCP that is a call to a
    private method (``Session._load_raw``, ``_save_raw``) or to the store directly; on
    another, FastMCP's ``Session`` may have changed."""
    release = fastmcp_version()
    served = ", ".join(HOOKED)
    if is_tested(release):
        cause = (
            f"a call around the Session methods sessionstore.fastmcp serves ({served}) -- a "
            "private one such as Session._load_raw or _save_raw, or the store itself. Use "
            "the public methods; the private ones read-modify-write one dict, the race the "
            "store exists to prevent"
        )
    else:
        cause = (
            f"FastMCP {release} is not a version sessionstore.fastmcp was tested with "
            f"({_TESTED_SPEC}): its Session may reach the store by methods the hook does "
            f"not serve ({served}); install a tested FastMCP (the fastmcp extra)"
        )
    return RuntimeError(f"FastMCP session key {key[:40]!r}... reached the key-value store: {cause}")
