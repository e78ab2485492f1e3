"""Every refusal as an ``MCPError`` with a code and a ``data.reason`` a client can act on.

The methods, the tools and the interceptor refuse through these, so the same fault reaches the
client the same way whichever of them met it (codes and reasons: ``protocol``).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Final, TypeVar

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..errors import (
    InvalidInput,
    InvalidTransition,
    ItemTooLarge,
    SessionExpired,
    SessionNotActive,
    SessionNotFound,
    SessionStoreError,
    ToolCallConflict,
    Unavailable,
)
from ..ids import validate_id
from .protocol import (
    OPEN_METHOD,
    SESSION_EXPIRED,
    SESSION_ID_KEY,
    SESSION_NOT_ACTIVE,
    SESSION_NOT_FOUND,
    SESSION_REQUIRED,
    STORE_UNAVAILABLE,
    TOOL_CALL_ID_REUSED,
)

T = TypeVar("T")

#: How an aware client gets a session, for the refusals of a call that needs one.
HOW_TO_OPEN: Final = f"open one ({OPEN_METHOD}) and send its id in _meta[{SESSION_ID_KEY!r}]"


def to_mcp_error(exc: Exception) -> MCPError:
    """Our errors as MCP errors a client can act on (never "Internal server error")."""
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, SessionNotFound):
        return MCPError(
            SESSION_NOT_FOUND,
            f"session {exc.session_id!r} not found",
            {"reason": "not_found", "sessionId": exc.session_id},
        )
    if isinstance(exc, SessionExpired):
        return MCPError(
            SESSION_EXPIRED,
            f"session {exc.session_id!r} has expired",
            {"reason": "expired", "sessionId": exc.session_id, "expiredAt": exc.ttl},
        )
    if isinstance(exc, SessionNotActive | InvalidTransition):
        return MCPError(
            SESSION_NOT_ACTIVE,
            f"session {exc.session_id!r} is {exc.current.value}, not active",
            {"reason": "not_active", "sessionId": exc.session_id, "status": exc.current.value},
        )
    if isinstance(exc, ToolCallConflict):
        return MCPError(
            TOOL_CALL_ID_REUSED,
            str(exc),
            {"reason": "tool_call_id_reused", "toolCallId": exc.tool_call_id},
        )
    if isinstance(exc, ItemTooLarge):  # a size problem, never "unavailable"
        size = exc.current + exc.added
        data: dict[str, Any] = {"reason": "too_large", "limit": exc.limit}
        if size:  # zero when the engine refused it by its own count
            data["bytes"] = size
        return MCPError(INVALID_PARAMS, f"too large to store: {exc}", data)
    if isinstance(exc, InvalidInput):
        return MCPError(INVALID_PARAMS, str(exc), {"reason": "invalid_input"})
    if isinstance(exc, Unavailable):
        return MCPError(
            STORE_UNAVAILABLE,
            f"session store unavailable: {exc}",
            {"reason": "unavailable", "maybeApplied": exc.maybe_applied},
        )
    return MCPError(STORE_UNAVAILABLE, f"session store error: {exc}", {"reason": "store_error"})


async def as_mcp(call: Awaitable[T]) -> T:
    """What ``call`` returns, our errors raised as MCP errors."""
    try:
        return await call
    except SessionStoreError as exc:
        raise to_mcp_error(exc) from exc


def meta_id(meta: Any, key: str) -> str | None:
    value = meta.get(key) if isinstance(meta, dict) else None
    return None if value is None else checked_id(value, key, field="key")


def required_session_id(meta: Any) -> str:
    session_id = meta_id(meta, SESSION_ID_KEY)
    if session_id is None:
        raise MCPError(
            SESSION_REQUIRED,
            f"this server keeps sessions in its store: {HOW_TO_OPEN}",
            {"reason": "session_required", "key": SESSION_ID_KEY},
        )
    return session_id


def checked_id(value: Any, argument: str, *, field: str = "argument") -> str:
    """``value`` as an id, or INVALID_PARAMS naming the argument (or ``_meta`` key) it came in."""
    try:
        return validate_id(value, argument)
    except InvalidInput as exc:
        raise MCPError(
            INVALID_PARAMS, str(exc), {"reason": "invalid_input", field: argument}
        ) from None
