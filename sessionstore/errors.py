"""One hierarchy of errors, grouped by what went wrong rather than by which call raised it.

Every condition failure from DynamoDB is translated into one of these (``raise ... from exc``), so
callers never have to pick apart a botocore ``ClientError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "ConflictRetriesExhausted",
    "ContextFull",
    "DynamoDBError",
    "InvalidInput",
    "InvalidTransition",
    "ItemOverLimit",
    "ItemTooLarge",
    "RequestOverLimit",
    "SessionAlreadyExists",
    "SessionExpired",
    "SessionNotActive",
    "SessionNotFound",
    "SessionStoreError",
    "TableNotFound",
    "TokensFull",
    "ToolCallConflict",
    "Unavailable",
    "VersionConflict",
]

if TYPE_CHECKING:
    from .models import Session, Status, ToolCallRecord


class SessionStoreError(Exception):
    """Base class of every error the store raises."""


class InvalidInput(SessionStoreError, ValueError):
    """An argument was refused before anything was sent to DynamoDB."""


class SessionNotFound(SessionStoreError):
    """No such session -- or one that belongs to another owner (the two look identical)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} not found")
        self.session_id = session_id


class SessionExpired(SessionStoreError):
    """The session's TTL has passed; DynamoDB may not have deleted it yet, but it is gone to us."""

    def __init__(self, session_id: str, ttl: int) -> None:
        super().__init__(f"session {session_id!r} expired at {ttl} (epoch seconds)")
        self.session_id = session_id
        self.ttl = ttl


class SessionAlreadyExists(SessionStoreError):
    """``create_session`` was given an id that is already taken (expired or not)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} already exists")
        self.session_id = session_id


class InvalidTransition(SessionStoreError):
    """The lifecycle table forbids moving from ``current`` to ``requested``."""

    def __init__(self, session_id: str, current: Status, requested: Status) -> None:
        super().__init__(
            f"session {session_id!r} cannot move from {current.value} to {requested.value}"
        )
        self.session_id = session_id
        self.current = current
        self.requested = requested


class SessionNotActive(SessionStoreError):
    """A write that needs an ``active`` session (append, tool record) found another status."""

    def __init__(self, session_id: str, current: Status) -> None:
        super().__init__(f"session {session_id!r} is {current.value}, not active")
        self.session_id = session_id
        self.current = current


class VersionConflict(SessionStoreError):
    """The caller's expected version is stale; ``current`` is the item as it is now."""

    def __init__(self, session_id: str, expected: int, current: Session) -> None:
        super().__init__(
            f"session {session_id!r}: expected version {expected}, found {current.version}"
        )
        self.session_id = session_id
        self.expected = expected
        self.current = current


class ConflictRetriesExhausted(VersionConflict):
    """Automatic retries on version conflicts ran out (heavy contention on one session)."""

    def __init__(self, session_id: str, expected: int, current: Session, attempts: int) -> None:
        super().__init__(session_id, expected, current)
        self.args = (
            f"session {session_id!r}: gave up after {attempts} attempts; the last expected "
            f"version {expected}, found {current.version}",
        )
        self.attempts = attempts


class ToolCallConflict(SessionStoreError):
    """The tool_call_id is already taken by a different request (tool name or input) -- or, for
    ``record_tool_call``, by a call claimed but not recorded yet (``same_request``: with this
    very request). ``stored`` is the record that holds the id, None while it is only claimed.

    The id names the *request*: a repeat with the same name and input is answered with the
    stored record, whatever output the repeat brings (a re-run tool may answer differently).
    """

    def __init__(
        self,
        session_id: str,
        tool_call_id: str,
        stored: ToolCallRecord | None = None,
        *,
        same_request: bool = False,
    ) -> None:
        if stored is not None:
            what = "recorded with a different tool name or input"
        elif same_request:
            what = "claimed by a call that has not been recorded"
        else:
            what = "claimed by a call with a different tool name or input"
        super().__init__(f"tool call {tool_call_id!r} of session {session_id!r} is already {what}")
        self.session_id = session_id
        self.tool_call_id = tool_call_id
        self.stored = stored
        self.same_request = same_request


class ItemTooLarge(SessionStoreError):
    """The write would take an item (or a session's attributes, ``what="attributes"``) past its
    size limit; nothing was written."""

    def __init__(
        self, current: int, added: int, limit: int, *, by_engine: bool = False, what: str = "item"
    ) -> None:
        if by_engine:
            message = (
                f"DynamoDB refused the write as too large (about {current} + {added} bytes; "
                f"configured limit {limit})"
            )
        else:
            message = (
                f"{what} would be {current + added} bytes ({current} + {added}), limit {limit}"
            )
        super().__init__(message)
        self.by_engine = by_engine
        self.what = what
        self.current = current
        self.added = added
        self.limit = limit


class RequestOverLimit(InvalidInput):
    """The request would pass one of DynamoDB's documented limits (expression length, operators,
    substitution variables, transaction size) and was refused unsent. ``name`` says which limit
    and where, ``size`` is the request's figure, ``maximum`` DynamoDB's."""

    def __init__(self, name: str, size: int, maximum: int, unit: str = "bytes") -> None:
        # Not ``super().__init__``: ``ItemOverLimit`` puts ``ItemTooLarge`` next in the MRO.
        SessionStoreError.__init__(
            self, f"{name}: {size:,} {unit}, over DynamoDB's limit of {maximum:,} {unit}"
        )
        self.name = name
        self.size = size
        self.maximum = maximum


class ItemOverLimit(RequestOverLimit, ItemTooLarge):
    """An item the request carries whole (a PutItem's, a transaction's Put) is over
    ``sizing.MAX_ITEM_BYTES``; refused unsent. Both an ``InvalidInput`` and an ``ItemTooLarge``."""

    def __init__(self, name: str, size: int, maximum: int) -> None:
        ItemTooLarge.__init__(self, 0, size, maximum)
        RequestOverLimit.__init__(self, name, size, maximum)  # its message wins


class ContextFull(SessionStoreError):
    """The append would take the session's context past ``max_context_messages`` or
    ``max_context_bytes``; nothing was written. ``messages`` and ``bytes`` are what the context
    held, ``added_*`` what the append brought."""

    def __init__(
        self,
        session_id: str,
        messages: int,
        bytes: int,
        added_messages: int,
        added_bytes: int,
        max_messages: int,
        max_bytes: int,
    ) -> None:
        over = []
        if messages + added_messages > max_messages:
            over.append(f"{messages} + {added_messages} messages > {max_messages}")
        if bytes + added_bytes > max_bytes:
            over.append(f"{bytes} + {added_bytes} bytes > {max_bytes}")
        super().__init__(f"context of session {session_id!r} is full: " + "; ".join(over))
        self.session_id = session_id
        self.messages = messages
        self.bytes = bytes
        self.added_messages = added_messages
        self.added_bytes = added_bytes
        self.max_messages = max_messages
        self.max_bytes = max_bytes


class TableNotFound(SessionStoreError):
    """The table does not exist (call ``SessionStore.create_table()``)."""


class Unavailable(SessionStoreError):
    """DynamoDB could not be reached or kept throttling after every retry.

    ``maybe_applied``: a write may have landed although no response came back. Calling again is
    safe except for ``append_context`` without ``expected_version``, which could land twice (only
    when its messages may have been stored: otherwise it says ``maybe_applied=False``).
    """

    def __init__(self, message: str, *, maybe_applied: bool) -> None:
        super().__init__(message)
        self.maybe_applied = maybe_applied


class TokensFull(Unavailable):
    """Every one of the session's recent request tokens is younger than the horizon: a write
    must wait (``write_tokens``); nothing was written. ``current``: the session as refused."""

    def __init__(self, session_id: str, current: Session, count: int, horizon_s: int) -> None:
        super().__init__(
            f"session {session_id!r}: {count} writes of the last {horizon_s} s hold request "
            "tokens; try again later",
            maybe_applied=False,
        )
        self.current = current


class DynamoDBError(SessionStoreError):
    """Any other error DynamoDB returned; ``code`` is its error code."""

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.details = details
