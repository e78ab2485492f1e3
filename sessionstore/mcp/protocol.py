"""The wire contract between a client and a store-backed server: keys, methods, error codes.

Everything here is plain data so a client can depend on it without the server side. ``_meta``
keys are reverse-DNS, as MCP asks of non-reserved keys. The methods are served through an
``Extension`` on both protocol generations. Errors are JSON-RPC errors in the
implementation-defined range, one code per meaning, with ``data.reason`` spelled out, so a client
never has to parse a message.
"""

from __future__ import annotations

from typing import Annotated, Final

from mcp_types import RequestParams, Result
from pydantic import BaseModel, Field

__all__ = [
    "CLOSE_METHOD",
    "CLOSE_TOOL",
    "EXTENSION_ID",
    "HANDLE_ARGUMENT",
    "IDEMPOTENCY_ARGUMENT",
    "OPEN_METHOD",
    "OPEN_TOOL",
    "REPLAYED_KEY",
    "SESSION_EXPIRED",
    "SESSION_ID_KEY",
    "SESSION_NOT_ACTIVE",
    "SESSION_NOT_FOUND",
    "SESSION_REQUIRED",
    "SESSION_SCOPE_KEY",
    "STORE_UNAVAILABLE",
    "TOOL_CALL_ID_KEY",
    "TOOL_CALL_ID_REUSED",
    "TOOL_CALL_IN_PROGRESS",
    "TOOL_CALL_OUTCOME_UNKNOWN",
    "CloseSessionParams",
    "CloseSessionResult",
    "IdempotencyKey",
    "OpenSessionParams",
    "OpenSessionResult",
    "OpenedSession",
    "SessionHandle",
]

#: On every request that acts in a session (``tools/call``, close).
SESSION_ID_KEY: Final = "io.sessionstore/session-id"
#: On every ``tools/call``: the client's idempotency key, the same on every delivery of one call,
#: unique per call within the session.
TOOL_CALL_ID_KEY: Final = "io.sessionstore/tool-call-id"
#: Set to true in the ``_meta`` of a result served from the record instead of a new execution.
REPLAYED_KEY: Final = "io.sessionstore/replayed"

#: ASGI scope key under which ``http_sessions.LegacySessions`` hands the checked session on.
SESSION_SCOPE_KEY: Final = "io.sessionstore.session"

#: The tools the extension contributes for clients that know no custom method (SEP-2567).
OPEN_TOOL: Final = "open_session"
CLOSE_TOOL: Final = "close_session"
#: The argument that carries a session handle: a tool that declares it needs a session.
HANDLE_ARGUMENT: Final = "session_id"
#: The argument that carries a client's idempotency key, for tools that declare it.
IDEMPOTENCY_ARGUMENT: Final = "idempotency_key"

SessionHandle = Annotated[
    str | None,
    Field(
        description=(
            "The session handle from the open_session tool. Leave it out when the client "
            "already keeps a session (Mcp-Session-Id)."
        ),
        min_length=1,
        max_length=128,
    ),
]
"""Declare ``session_id: SessionHandle = None`` on a tool: it then needs a session."""

IdempotencyKey = Annotated[
    str | None,
    Field(
        description=(
            "A key unique to this call and the same on every retry of it: a retry then "
            "returns the first result instead of running again."
        ),
        min_length=1,
        max_length=128,
    ),
]
"""Declare ``idempotency_key: IdempotencyKey = None`` on a tool: retries run it at most once."""

EXTENSION_ID: Final = "io.sessionstore/sessions"
OPEN_METHOD: Final = "io.sessionstore/session/open"
CLOSE_METHOD: Final = "io.sessionstore/session/close"

#: No session id in ``_meta`` (data: ``key``).
SESSION_REQUIRED: Final = -32060
#: No such session -- or another principal's: the two are indistinguishable on purpose.
SESSION_NOT_FOUND: Final = -32061
#: The session's ttl has passed (data: ``expiredAt``, epoch seconds).
SESSION_EXPIRED: Final = -32062
#: The session is not active: closing or closed, or not yet open (data: ``status``).
SESSION_NOT_ACTIVE: Final = -32063
#: Another delivery of this tool call is executing now (data: ``leaseUntil``, epoch ms).
TOOL_CALL_IN_PROGRESS: Final = -32064
#: The call was claimed, its lease ran out and nothing was recorded: it may or may not have run,
#: and it will not be run again under this id.
TOOL_CALL_OUTCOME_UNKNOWN: Final = -32065
#: The tool-call id was first used for another tool or other arguments.
TOOL_CALL_ID_REUSED: Final = -32066
#: DynamoDB could not be reached after retries (data: ``maybeApplied``).
STORE_UNAVAILABLE: Final = -32067


class OpenSessionParams(RequestParams):
    ttl_seconds: int | None = None


class OpenSessionResult(Result):
    session_id: str
    status: str
    expires_at: int  # epoch seconds


class CloseSessionParams(RequestParams):
    pass


class CloseSessionResult(Result):
    session_id: str
    status: str


class OpenedSession(BaseModel):
    """What the ``open_session`` / ``close_session`` tools answer (structured content)."""

    session_id: str
    status: str
    expires_at: int  # epoch seconds
