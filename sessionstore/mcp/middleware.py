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
3. a claim (``claims.claim``: one transaction that puts the call item ``claimed``) says whether
   this delivery may execute: if not, the stored result is returned (finished), or a clear
   error says "in progress" or "outcome unknown" -- the tool never runs twice under one id;
4. the tool runs with ``current_session()`` set for it; its duration is measured on the store's
   clock;
5. ``claims.complete`` writes the result (or the tool's error) into the claimed item: one
   UpdateItem.

A tool the server annotates read-only or idempotent is not claimed: the session is read (or
was checked by the legacy layer), the tool runs, and ``claims.put_record`` puts its record.

Fresh call on a warm instance: 2 requests, 5 write units (claim 4 + completion 1); a repeat of
a finished call: 1 request (the refused claim returns the record), and the tool is not run; a
harmless call: a read and one PutItem (1 write unit).

A tool that answers ``InputRequiredResult`` (2026-07-28 multi-round-trip) has not finished: its
claim travels in the SDK-sealed ``requestState`` (``_suspend`` / ``_resume``), and the round
that finishes completes it; a retry of the whole call still meets the claim.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
from collections import OrderedDict
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Annotated, Any
from weakref import WeakKeyDictionary

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import principal_components
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, ToolBinding
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    InputRequiredResult,
    TextContent,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import Field

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
from ..lifecycle import Status
from ..models import Session, ToolCallRecord
from . import claims
from .claims import State, ToolCallIdReused
from .protocol import (
    CLOSE_METHOD,
    CLOSE_TOOL,
    EXTENSION_ID,
    HANDLE_ARGUMENT,
    IDEMPOTENCY_ARGUMENT,
    OPEN_METHOD,
    OPEN_TOOL,
    REPLAYED_KEY,
    SESSION_EXPIRED,
    SESSION_ID_KEY,
    SESSION_NOT_ACTIVE,
    SESSION_NOT_FOUND,
    SESSION_REQUIRED,
    SESSION_SCOPE_KEY,
    STORE_UNAVAILABLE,
    TOOL_CALL_ID_KEY,
    TOOL_CALL_ID_REUSED,
    TOOL_CALL_IN_PROGRESS,
    TOOL_CALL_OUTCOME_UNKNOWN,
    CloseSessionParams,
    CloseSessionResult,
    OpenedSession,
    OpenSessionParams,
    OpenSessionResult,
    SessionHandle,
)

_TTL_CACHE_SIZE = 10_000
#: A session's default idle timeout: the SDK's own for its in-memory sessions
#: (``mcp.server.streamable_http_manager.DEFAULT_SESSION_IDLE_TIMEOUT``, 30 minutes).
DEFAULT_IDLE_SECONDS = 30 * 60

logger = logging.getLogger(__name__)
_ATTACHED: WeakKeyDictionary[MCPServer, SessionStoreExtension] = WeakKeyDictionary()


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


@dataclass(frozen=True)
class _Route:
    """How one ``tools/call`` is served: in which session, under which key, claimed or not
    (a harmless tool is not)."""

    session_id: str
    owner: str | None
    tool_call_id: str
    keyed: bool  # the id came from the client: a retry carries it again
    harmless: bool  # read-only or idempotent by the server's own annotations
    checked: Session | None  # read in this request (legacy layer): live and active


class SessionStoreExtension(Extension):
    """Sessions in the table and at-most-once tool calls, on any ``MCPServer``.

    ``lease_seconds``: how long a claim stays "in progress" before a repeat is told "outcome
    unknown" -- longer than the slowest tool. ``default_ttl_seconds`` / ``max_ttl_seconds``
    bound what a session may ask for: its absolute cap. ``idle_seconds``: a session also
    expires after this long without a request that wrote to it (default 1800, the SDK's own
    ``DEFAULT_SESSION_IDLE_TIMEOUT``; None: only the cap) -- every claim and record moves the
    deadline on at no extra request, and the legacy ``Mcp-Session-Id`` check adds one write
    (``SessionStore.touch``) at most once per half idle period. ``open_tool`` /
    ``close_tool``: the names of the tools it contributes for clients that know no custom
    method (None: not contributed);
    ``handle_argument`` / ``idempotency_argument``: the tool arguments that carry a session
    handle and an idempotency key. Call ``attach(server)`` once the server exists
    (``create_server`` does): the interceptor looks tools up in it.
    """

    identifier = EXTENSION_ID

    def __init__(
        self,
        store: AsyncSessionStore,
        *,
        lease_seconds: int = 300,
        default_ttl_seconds: int = 3600,
        max_ttl_seconds: int = 7 * 86400,
        idle_seconds: int | None = DEFAULT_IDLE_SECONDS,
        open_tool: str | None = OPEN_TOOL,
        close_tool: str | None = CLOSE_TOOL,
        handle_argument: str = HANDLE_ARGUMENT,
        idempotency_argument: str = IDEMPOTENCY_ARGUMENT,
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
        if idle_seconds is not None and (
            isinstance(idle_seconds, bool) or not isinstance(idle_seconds, int) or idle_seconds < 1
        ):
            raise InvalidInput("idle_seconds must be None or a positive int")
        for name, text in (
            ("open_tool", open_tool),
            ("close_tool", close_tool),
            ("handle_argument", handle_argument),
            ("idempotency_argument", idempotency_argument),
        ):
            if text is not None and (not isinstance(text, str) or not text.isidentifier()):
                raise InvalidInput(f"{name} must be a Python identifier, got {text!r}")
        self.store = store
        self.lease_ms = lease_seconds * 1000
        self.default_ttl_seconds = default_ttl_seconds
        self.max_ttl_seconds = max_ttl_seconds
        self.idle_seconds = idle_seconds
        self.open_tool = open_tool
        self.close_tool = close_tool
        self.handle_argument = handle_argument
        self.idempotency_argument = idempotency_argument
        self._server: MCPServer | None = None
        # A session's ttl never changes once created, so one read per session per instance
        # (the claim's condition compares it, so a stale entry costs a retry, never a claim
        # that expires with another session).
        self._ttls: OrderedDict[tuple[str, str | None], int] = OrderedDict()

    def attach(self, server: MCPServer) -> None:
        """The server whose tools the interceptor validates and classifies."""
        self._server = server
        _ATTACHED[server] = self

    @staticmethod
    def attached_to(server: MCPServer) -> SessionStoreExtension | None:
        """The extension ``attach``-ed to ``server``, if any."""
        return _ATTACHED.get(server)

    def settings(self) -> dict[str, Any]:
        return {
            "sessionIdKey": SESSION_ID_KEY,
            "toolCallIdKey": TOOL_CALL_ID_KEY,
            "methods": [OPEN_METHOD, CLOSE_METHOD],
            "tools": [t for t in (self.open_tool, self.close_tool) if t],
            "handleArgument": self.handle_argument,
            "idempotencyArgument": self.idempotency_argument,
        }

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding(OPEN_METHOD, OpenSessionParams, self._open),
            MethodBinding(CLOSE_METHOD, CloseSessionParams, self._close),
        )

    def tools(self) -> Sequence[ToolBinding]:
        bindings = []
        for name, fn in (
            (self.open_tool, self._open_tool_fn()),
            (self.close_tool, self._close_tool_fn()),
        ):
            if name:
                # The SDK would send the docstring's indentation along.
                described = {"name": name, "description": inspect.cleandoc(fn.__doc__ or "")}
                bindings.append(ToolBinding(fn, kwargs=described))
        return bindings

    # ------------------------------------------------------------------ one session model
    # The methods, the tools and the legacy HTTP layer all open, check and end sessions here.

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

    # ------------------------------------------------------------------ lifecycle methods

    async def _open(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        assert isinstance(params, OpenSessionParams)
        try:
            session = await self.open_session(ttl_seconds=params.ttl_seconds)
        except SessionStoreError as exc:
            raise to_mcp_error(exc) from exc
        return OpenSessionResult(
            session_id=session.session_id, status=session.status.value, expires_at=session.ttl
        )

    async def _close(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        session_id = _required_session_id(params.meta if params is not None else None)
        try:
            session = await self.end_session(session_id)
        except SessionStoreError as exc:
            raise to_mcp_error(exc, session_id) from exc
        return CloseSessionResult(session_id=session_id, status=session.status.value)

    def _open_tool_fn(self) -> Any:
        extension = self

        async def open_session(
            ttl_seconds: Annotated[int | None, Field(ge=1)] = None,
        ) -> OpenedSession:
            """Open a session: pass the session_id it returns to every tool that takes one,
            and close it with close_session when done. It expires at expires_at (epoch
            seconds) in any case."""
            try:
                session = await extension.open_session(ttl_seconds=ttl_seconds)
            except SessionStoreError as exc:
                raise to_mcp_error(exc) from exc
            return OpenedSession(
                session_id=session.session_id,
                status=session.status.value,
                expires_at=session.ttl,
            )

        return open_session

    def _close_tool_fn(self) -> Any:
        extension = self

        async def close_session(session_id: SessionHandle = None) -> OpenedSession:
            """Close the session: later calls with its session_id are refused."""
            current = current_session()  # the interceptor resolved and checked it
            try:
                session = await extension.end_session(current.session_id)
            except SessionStoreError as exc:
                raise to_mcp_error(exc, current.session_id) from exc
            return OpenedSession(
                session_id=session.session_id, status=session.status.value, expires_at=session.ttl
            )

        return close_session

    # ------------------------------------------------------------------ tools/call

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        tool = self._tool(params.name)
        arguments: dict[str, Any] = dict(params.arguments or {})
        if tool is None or not _valid(tool, arguments):
            return await call_next(ctx)  # the SDK's own error; nothing claimed or written
        declared = tool.parameters.get("properties", {})
        legacy = _legacy_session(ctx)
        session_id = self._session_id(arguments, params.meta, legacy, declared)
        if session_id is None:
            if self.handle_argument in declared:
                raise self._session_required(params.name, ctx.protocol_version)
            return await call_next(ctx)  # a tool that needs no session, called without one
        if legacy is not None and legacy.session_id != session_id:
            legacy = None  # an explicit handle names another session: check that one
        owner = principal_owner()
        if params.name == self.close_tool:
            return await self._serve_close(session_id, owner, legacy, params.name, ctx, call_next)
        route = self._route(params, arguments, declared, tool, session_id, owner, legacy)
        # A later round of a multi-round-trip call we claimed carries its claim.
        claimed = _resume(params, session_id, arguments)
        ttl = 0
        try:
            if claimed is not None:
                route = replace(route, tool_call_id=claimed.tool_call_id)
            elif route.harmless:
                # Refuse before the tool runs; no claim, since running it twice changes nothing.
                session = route.checked or await self.session_for_request(session_id)
                ttl = session.ttl
            else:
                outcome = await self._claim(route, params.name, arguments)
                if outcome.state is not State.CLAIMED:
                    return _answer_repeat(outcome)
                claimed = outcome.claim
        except (SessionStoreError, ToolCallIdReused) as exc:
            raise to_mcp_error(exc, session_id) from exc
        return await self._execute(route, params, arguments, claimed, ttl, ctx, call_next)

    def _route(
        self,
        params: CallToolRequestParams,
        arguments: dict[str, Any],
        declared: dict[str, Any],
        tool: Tool,
        session_id: str,
        owner: str | None,
        legacy: Session | None,
    ) -> _Route:
        key = _meta_id(params.meta, TOOL_CALL_ID_KEY)
        if key is None and self.idempotency_argument in declared:
            value = arguments.get(self.idempotency_argument)
            key = None if value is None else _checked_id(value, self.idempotency_argument)
        hints = tool.annotations
        # The server's own hints, so they can be trusted: re-running such a tool is harmless.
        harmless = hints is not None and bool(hints.read_only_hint or hints.idempotent_hint)
        return _Route(
            session_id=session_id,
            owner=owner,
            tool_call_id=key if key is not None else self.store.store.ids.token(),
            keyed=key is not None,
            harmless=harmless,
            checked=legacy,
        )

    async def _claim(self, route: _Route, name: str, arguments: dict[str, Any]) -> claims.Outcome:
        ttl = (
            route.checked.ttl
            if route.checked is not None
            else await self._session_ttl(route.session_id, route.owner)
        )
        outcome = await self.store.run(
            claims.claim,
            self.store.store,
            route.session_id,
            route.tool_call_id,
            name,
            arguments,
            owner=route.owner,
            ttl=ttl,
            lease_ms=self.lease_ms,
        )
        if outcome.state is State.CLAIMED and outcome.claim.ttl != ttl:
            self._remember(route.session_id, route.owner, outcome.claim.ttl)
        return outcome

    async def _execute(
        self,
        route: _Route,
        params: CallToolRequestParams,
        arguments: dict[str, Any],
        claimed: claims.Claim | None,
        ttl: int,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        view = ToolSession(
            route.session_id, route.owner, route.tool_call_id, params.name, self.store
        )
        started = self.store.clock.now_ms()
        token = _CURRENT.set(view)
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            # The tool refused with a protocol error: that is its outcome, recorded as such.
            output: JSON = {"mcpError": exc.error.model_dump(mode="json", exclude_none=True)}
            await self._record(view, arguments, output, started, claimed, ttl)
            raise
        finally:
            _CURRENT.reset(token)
        if isinstance(result, InputRequiredResult):
            # Not finished: the next round carries the claim in the sealed requestState.
            return _suspend(result, claimed)
        if isinstance(result, CallToolResult):
            output = {"callToolResult": _dump(result)}
        else:
            output = {"unrecordable": type(result).__name__}
        await self._record(view, arguments, output, started, claimed, ttl)
        return result

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
            try:
                await self.store.get_session(session_id, owner=owner)
            except SessionStoreError as exc:
                raise to_mcp_error(exc, session_id) from exc
        view = ToolSession(session_id, owner, "", name, self.store)
        token = _CURRENT.set(view)
        try:
            return await call_next(ctx)
        finally:
            _CURRENT.reset(token)

    def _tool(self, name: str) -> Tool | None:
        if self._server is None:
            raise MCPError(
                INTERNAL_ERROR,
                "SessionStoreExtension is not attached to its server: call "
                "extension.attach(server) (create_server does)",
            )
        # 2.3.0 has no public lookup of one registered tool with its argument model.
        return self._server._tool_manager.get_tool(name)

    def _session_id(
        self,
        arguments: dict[str, Any],
        meta: Any,
        legacy: Session | None,
        declared: dict[str, Any],
    ) -> str | None:
        """The handle argument, else ``_meta``'s session id, else the legacy session."""
        if self.handle_argument in declared and arguments.get(self.handle_argument) is not None:
            return _checked_id(arguments[self.handle_argument], self.handle_argument)
        from_meta = _meta_id(meta, SESSION_ID_KEY)
        if from_meta is not None:
            return from_meta
        return legacy.session_id if legacy is not None else None

    def _session_required(self, name: str, protocol_version: str) -> MCPError:
        if self.open_tool:
            how = (
                f"call the tool {self.open_tool!r} and pass the session_id it returns as this "
                f"tool's {self.handle_argument!r} argument"
            )
        else:
            how = f"open one ({OPEN_METHOD}) and send its id in _meta[{SESSION_ID_KEY!r}]"
        if protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            how = f"initialize again to get an Mcp-Session-Id, or {how}"
        return MCPError(
            SESSION_REQUIRED,
            f"tool {name!r} needs a session: {how}",
            {"reason": "session_required", "argument": self.handle_argument, "key": SESSION_ID_KEY},
        )

    async def _record(
        self,
        view: ToolSession,
        arguments: dict[str, Any],
        output: JSON,
        started: int,
        claimed: claims.Claim | None,
        ttl: int,
    ) -> None:
        duration = max(0, self.store.clock.now_ms() - started)
        try:
            try:
                await self._write_result(view, arguments, output, duration, claimed, ttl)
            except ItemTooLarge as exc:
                # The result is delivered this once; a repeat is told it was too large to keep.
                too_large: JSON = {"tooLarge": {"bytes": exc.current + exc.added}}
                await self._write_result(view, arguments, too_large, duration, claimed, ttl)
        except (SessionStoreError, ToolCallIdReused) as exc:
            error = to_mcp_error(exc, view.session_id)
            if claimed is None:  # harmless: it ran, but running it changed nothing
                raise error from exc
            raise MCPError(
                error.code,
                f"the tool ran but its result could not be recorded: {error.message}",
                {**(error.data or {}), "executed": True},
            ) from exc

    async def _write_result(
        self,
        view: ToolSession,
        arguments: dict[str, Any],
        output: JSON,
        duration: int,
        claimed: claims.Claim | None,
        ttl: int,
    ) -> None:
        if claimed is not None:
            await self.store.run(
                claims.complete,
                self.store.store,
                view.session_id,
                view.tool_call_id,
                claimed,
                arguments,
                output,
                duration,
            )
            return
        await self.store.run(
            claims.put_record,
            self.store.store,
            view.session_id,
            view.tool_call_id,
            view.tool_name,
            arguments,
            output,
            duration,
            ttl=ttl,
        )

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


def _valid(tool: Tool, arguments: dict[str, Any]) -> bool:
    """Whether the SDK will accept these arguments (its own validation, run early)."""
    try:
        tool.fn_metadata.validate_arguments(arguments)
    except Exception:
        return False
    return True


def _checked_id(value: Any, argument: str) -> str:
    try:
        return validate_id(value, argument)
    except InvalidInput as exc:
        raise MCPError(
            INVALID_PARAMS, str(exc), {"reason": "invalid_input", "argument": argument}
        ) from None


def _legacy_session(ctx: ServerRequestContext[Any, Any]) -> Session | None:
    """The session ``http_sessions.LegacySessions`` checked for this HTTP request, if any."""
    request = ctx.request
    scope = getattr(request, "scope", None)
    session = scope.get(SESSION_SCOPE_KEY) if isinstance(scope, dict) else None
    return session if isinstance(session, Session) else None


# ---------------------------------------------------------------------------- multi-round-trip

_ROUND_KEY = "io.sessionstore/claim"


def _suspend(result: InputRequiredResult, claimed: claims.Claim | None) -> InputRequiredResult:
    """The SDK seals ``requestState``, so the claim comes back only unaltered, from the same
    principal, for the same tool and arguments."""
    if claimed is None:
        return result  # nothing claimed (a harmless tool): the rounds just run
    state = json.dumps(
        {
            _ROUND_KEY: {
                "sessionId": claimed.session_id,
                "toolCallId": claimed.tool_call_id,
                "token": claimed.token,
                "ttl": claimed.ttl,
            },
            "state": result.request_state,
        }
    )
    return result.model_copy(update={"request_state": state})


def _resume(
    params: CallToolRequestParams, session_id: str, arguments: dict[str, Any]
) -> claims.Claim | None:
    """Our claim from a later round's ``requestState``; the tool gets its own state back."""
    if params.request_state is None:
        return None
    try:
        wrapped = json.loads(params.request_state)
    except ValueError:
        return None
    if not isinstance(wrapped, dict) or not isinstance(wrapped.get(_ROUND_KEY), dict):
        return None
    sealed = wrapped[_ROUND_KEY]
    # The handler is invoked with this very params object: it must see the tool's state.
    params.request_state = wrapped.get("state")
    if sealed.get("sessionId") != session_id:
        return None  # sealed for another session: this delivery starts afresh
    return claims.Claim(
        session_id=session_id,
        tool_call_id=str(sealed["toolCallId"]),
        tool_name=params.name,
        fingerprint=claims.call_fingerprint(params.name, arguments),
        token=str(sealed["token"]),
        lease_until_ms=None,
        ttl=int(sealed["ttl"]),
    )


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
