"""The store in an MCP server: sessions in the table, every tool call executed at most once.

``SessionStoreExtension`` is an SDK ``Extension`` (``mcp/server/extension.py``), the public
seam 2.3.0 offers for this: it adds two request methods (open and close a session) and one
``tools/call`` interceptor. The interceptor rather than a ``ServerMiddleware``: it runs after
the SDK has validated the params and wraps the tool handler itself, so it sees typed params and
the tool's ``CallToolResult`` (a raising tool already turned into ``isError``), on both protocol
generations, legacy and modern alike.

For every ``tools/call`` (see ``protocol`` for the keys and error codes):

1. the session id and the tool-call id come from ``_meta``; the owner is the authenticated
   principal (``get_access_token()``), or nobody on an unauthenticated server;
2. the session's ttl is learned once per instance (one ``GetItem``; it never changes), so a
   missing, expired or foreign session is refused before anything is written;
3. a claim (``claims.claim``: one transaction) says whether this delivery may execute: if not,
   the stored result is returned (finished), or a clear error says "in progress" or "outcome
   unknown" -- the tool never runs twice under one id;
4. the tool runs with ``current_session()`` set for it; its duration is measured on the store's
   clock;
5. ``record_tool_call`` records the result (or the tool's error) exactly once.

Fresh call on a warm instance: 2 requests (claim + record); a repeat of a finished call: 3
(the failed claim and two reads), and the tool is not run.

Not covered: a tool that answers ``InputRequiredResult`` (2026-07-28 multi-round-trip) has not
finished; its retry would meet its own claim and be told "in progress". Such tools should not be
served behind this interceptor yet.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolRequestParams, CallToolResult, TextContent

from ..aio import AsyncSessionStore
from ..codec import JSON
from ..errors import (
    InvalidInput,
    InvalidTransition,
    ItemTooLarge,
    SessionExpired,
    SessionNotActive,
    SessionNotFound,
    SessionStoreError,
    Unavailable,
)
from ..ids import validate_id
from ..models import Session, ToolCallRecord
from ..status import Status
from . import claims
from .claims import State, ToolCallIdReused
from .protocol import (
    CLOSE_METHOD,
    EXTENSION_ID,
    OPEN_METHOD,
    REPLAYED_KEY,
    SESSION_EXPIRED,
    SESSION_ID_KEY,
    SESSION_NOT_ACTIVE,
    SESSION_NOT_FOUND,
    SESSION_REQUIRED,
    STORE_UNAVAILABLE,
    TOOL_CALL_ID_KEY,
    TOOL_CALL_ID_REUSED,
    TOOL_CALL_IN_PROGRESS,
    TOOL_CALL_OUTCOME_UNKNOWN,
    CloseSessionParams,
    CloseSessionResult,
    OpenSessionParams,
    OpenSessionResult,
)

_TTL_CACHE_SIZE = 10_000


# ---------------------------------------------------------------------------- the tool's view


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


_CURRENT: ContextVar[ToolSession | None] = ContextVar("sessionstore_tool_session", default=None)


def current_session() -> ToolSession:
    """The session of the tool call being executed (set by the interceptor, a context variable,
    so it follows the call into sync tools run on worker threads too)."""
    session = _CURRENT.get()
    if session is None:
        raise NoToolSession("no store-backed session: is SessionStoreExtension installed?")
    return session


# ---------------------------------------------------------------------------- principal


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


# ---------------------------------------------------------------------------- errors


def to_mcp_error(exc: Exception, session_id: str | None = None) -> MCPError:
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
    if isinstance(exc, ToolCallIdReused):
        return MCPError(
            TOOL_CALL_ID_REUSED,
            str(exc),
            {"reason": "tool_call_id_reused", "toolCallId": exc.claim.tool_call_id},
        )
    if isinstance(exc, InvalidInput):
        return MCPError(INVALID_PARAMS, str(exc), {"reason": "invalid_input"})
    if isinstance(exc, Unavailable):
        return MCPError(
            STORE_UNAVAILABLE,
            f"session store unavailable: {exc}",
            {"reason": "unavailable", "maybeApplied": exc.maybe_applied},
        )
    return MCPError(STORE_UNAVAILABLE, f"session store error: {exc}", {"reason": "store_error"})


def _meta_id(meta: Any, key: str) -> str | None:
    value = meta.get(key) if isinstance(meta, dict) else None
    if value is None:
        return None
    try:
        return validate_id(value, key)
    except InvalidInput as exc:
        raise MCPError(INVALID_PARAMS, str(exc), {"reason": "invalid_input", "key": key}) from None


def _required_session_id(meta: Any) -> str:
    session_id = _meta_id(meta, SESSION_ID_KEY)
    if session_id is None:
        raise MCPError(
            SESSION_REQUIRED,
            f"this server keeps sessions in its store: open one ({OPEN_METHOD}) and send its id "
            f"in _meta[{SESSION_ID_KEY!r}]",
            {"reason": "session_required", "key": SESSION_ID_KEY},
        )
    return session_id


# ---------------------------------------------------------------------------- the extension


class SessionStoreExtension(Extension):
    """Sessions in the table and at-most-once tool calls, on any ``MCPServer``.

    ``lease_seconds``: how long a claim stays "in progress" before a repeat is told "outcome
    unknown" -- longer than the slowest tool. ``default_ttl_seconds`` / ``max_ttl_seconds``
    bound what ``session/open`` accepts.
    """

    identifier = EXTENSION_ID

    def __init__(
        self,
        store: AsyncSessionStore,
        *,
        lease_seconds: int = 300,
        default_ttl_seconds: int = 3600,
        max_ttl_seconds: int = 7 * 86400,
    ) -> None:
        if not isinstance(store, AsyncSessionStore):
            raise InvalidInput("store must be an AsyncSessionStore")
        for name, value in (
            ("lease_seconds", lease_seconds),
            ("default_ttl_seconds", default_ttl_seconds),
            ("max_ttl_seconds", max_ttl_seconds),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInput(f"{name} must be a positive int")
        if default_ttl_seconds > max_ttl_seconds:
            raise InvalidInput("default_ttl_seconds must not exceed max_ttl_seconds")
        self.store = store
        self.lease_ms = lease_seconds * 1000
        self.default_ttl_seconds = default_ttl_seconds
        self.max_ttl_seconds = max_ttl_seconds
        # A session's ttl never changes once created, so one read per session per instance
        # (the claim's condition compares it, so a stale entry costs a retry, never a claim
        # that expires with another session).
        self._ttls: OrderedDict[tuple[str, str | None], int] = OrderedDict()

    def settings(self) -> dict[str, Any]:
        return {
            "sessionIdKey": SESSION_ID_KEY,
            "toolCallIdKey": TOOL_CALL_ID_KEY,
            "methods": [OPEN_METHOD, CLOSE_METHOD],
        }

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding(OPEN_METHOD, OpenSessionParams, self._open),
            MethodBinding(CLOSE_METHOD, CloseSessionParams, self._close),
        )

    # ------------------------------------------------------------------ lifecycle methods

    async def _open(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        assert isinstance(params, OpenSessionParams)
        ttl_seconds = params.ttl_seconds or self.default_ttl_seconds
        if not 0 < ttl_seconds <= self.max_ttl_seconds:
            raise MCPError(
                INVALID_PARAMS,
                f"ttlSeconds must be in 1..{self.max_ttl_seconds}",
                {"reason": "invalid_input"},
            )
        owner = principal_owner()
        try:
            created = await self.store.create_session(owner=owner, ttl_seconds=ttl_seconds)
            session = await self.store.activate(created.session_id, owner=owner)
        except SessionStoreError as exc:
            raise to_mcp_error(exc) from exc
        self._remember(session.session_id, owner, session.ttl)
        return OpenSessionResult(
            session_id=session.session_id, status=session.status.value, expires_at=session.ttl
        )

    async def _close(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        session_id = _required_session_id(params.meta if params is not None else None)
        owner = principal_owner()
        try:
            try:
                await self.store.begin_close(session_id, owner=owner)
            except InvalidTransition as exc:
                if exc.current is not Status.CLOSED:
                    raise
            session = await self.store.close(session_id, owner=owner)
        except SessionStoreError as exc:
            raise to_mcp_error(exc, session_id) from exc
        return CloseSessionResult(session_id=session_id, status=session.status.value)

    # ------------------------------------------------------------------ tools/call

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        meta = params.meta
        session_id = _required_session_id(meta)
        tool_call_id = _meta_id(meta, TOOL_CALL_ID_KEY)
        if tool_call_id is None:
            raise MCPError(
                INVALID_PARAMS,
                f"every tools/call needs an idempotency key in _meta[{TOOL_CALL_ID_KEY!r}]",
                {"reason": "tool_call_id_required", "key": TOOL_CALL_ID_KEY},
            )
        owner = principal_owner()
        arguments: dict[str, Any] = dict(params.arguments or {})
        try:
            ttl = await self._session_ttl(session_id, owner)
            outcome = await self.store.run(
                claims.claim,
                self.store.store,
                session_id,
                tool_call_id,
                params.name,
                arguments,
                owner=owner,
                ttl=ttl,
                lease_ms=self.lease_ms,
            )
        except (SessionStoreError, ToolCallIdReused) as exc:
            raise to_mcp_error(exc, session_id) from exc
        if outcome.state is State.CLAIMED and outcome.claim.ttl != ttl:
            self._remember(session_id, owner, outcome.claim.ttl)  # the claim learnt the session's
        if outcome.state is not State.CLAIMED:
            return _answer_repeat(outcome)

        view = ToolSession(session_id, owner, tool_call_id, params.name, self.store)
        started = self.store.clock.now_ms()
        token = _CURRENT.set(view)
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            # The tool refused with a protocol error: that is its outcome, recorded as such.
            output: JSON = {"mcpError": exc.error.model_dump(mode="json", exclude_none=True)}
            await self._record(view, arguments, output, started)
            raise
        finally:
            _CURRENT.reset(token)
        if isinstance(result, CallToolResult):
            output = {"callToolResult": _dump(result)}
        else:
            output = {"unrecordable": type(result).__name__}
        await self._record(view, arguments, output, started)
        return result

    async def _record(
        self, view: ToolSession, arguments: dict[str, Any], output: JSON, started: int
    ) -> None:
        duration = max(0, self.store.clock.now_ms() - started)
        try:
            try:
                await self.store.record_tool_call(
                    view.session_id,
                    view.tool_call_id,
                    view.tool_name,
                    arguments,
                    output,
                    duration,
                    owner=view.owner,
                )
            except ItemTooLarge as exc:
                # The result is delivered this once; a repeat is told it was too large to keep.
                too_large: JSON = {"tooLarge": {"bytes": exc.current + exc.added}}
                await self.store.record_tool_call(
                    view.session_id,
                    view.tool_call_id,
                    view.tool_name,
                    arguments,
                    too_large,
                    duration,
                    owner=view.owner,
                )
        except SessionStoreError as exc:
            error = to_mcp_error(exc, view.session_id)
            raise MCPError(
                error.code,
                f"the tool ran but its result could not be recorded: {error.message}",
                {**(error.data or {}), "executed": True},
            ) from exc

    async def _session_ttl(self, session_id: str, owner: str | None) -> int:
        key = (session_id, owner)
        ttl = self._ttls.get(key)
        # Past its ttl the id may name a new session (re-created after TTL removed the old).
        if ttl is None or ttl <= self.store.clock.now_ms() // 1000:
            session = await self.store.get_session(session_id, owner=owner)
            ttl = session.ttl
            self._remember(session_id, owner, ttl)
        return ttl

    def _remember(self, session_id: str, owner: str | None, ttl: int) -> None:
        self._ttls[(session_id, owner)] = ttl
        self._ttls.move_to_end((session_id, owner))
        while len(self._ttls) > _TTL_CACHE_SIZE:
            self._ttls.popitem(last=False)


def _dump(result: CallToolResult) -> dict[str, Any]:
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    dumped.pop("_meta", None)  # per-response metadata, not part of the outcome
    return dict(dumped)


def _answer_repeat(outcome: claims.Outcome) -> HandlerResult:
    claim = outcome.claim
    ids = {"sessionId": claim.session_id, "toolCallId": claim.tool_call_id}
    if outcome.state is State.RECORDED and outcome.record is not None:
        stored = outcome.record.output
        if isinstance(stored, dict) and "callToolResult" in stored:
            replay = CallToolResult.model_validate(stored["callToolResult"])
            return replay.model_copy(update={"meta": {REPLAYED_KEY: True}})
        if isinstance(stored, dict) and "mcpError" in stored:
            error = stored["mcpError"]
            raise MCPError(error["code"], error["message"], error.get("data"))
        return CallToolResult(
            content=[TextContent(type="text", text=f"recorded without a result: {stored}")],
            is_error=True,
            _meta={REPLAYED_KEY: True},
        )
    if outcome.state is State.IN_PROGRESS:
        raise MCPError(
            TOOL_CALL_IN_PROGRESS,
            f"tool call {claim.tool_call_id!r} is being executed by another delivery; "
            "ask again later for its result",
            {"reason": "in_progress", **ids, "leaseUntil": claim.lease_until_ms},
        )
    raise MCPError(
        TOOL_CALL_OUTCOME_UNKNOWN,
        f"tool call {claim.tool_call_id!r} was started but never recorded: it may or may not "
        "have run, and it will not be run again under this id",
        {"reason": "outcome_unknown", **ids},
    )
