"""The store in an MCP server: sessions in the table, every tool call executed at most once.

MCP layer, the extension itself. ``SessionStoreExtension`` is an SDK ``Extension``
(``mcp/server/extension.py``), the public seam 2.3.0 offers for this: it adds two request
methods and two tools (open and close a session) and one ``tools/call`` interceptor. The
interceptor rather than a ``ServerMiddleware``: it runs after the SDK has validated the params
and wraps the tool handler itself, so it sees typed params and the tool's ``CallToolResult`` (a
raising tool already turned into ``isError``), on both protocol generations alike.

It holds three objects, each in the module named for it, each handing its result down and never
calling back up: ``Sessions`` (open, check and end a session, for the methods, the tools, the
interceptor and the legacy HTTP layer), ``Routing`` (which session and key a call uses, and
whether it is claimed; made by ``attach``, as it reads the server's tools) and ``Calls`` (claim,
run, record, answer a repeat). Keys and error codes: ``protocol``; what a call costs: the README.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Annotated, Any
from weakref import WeakKeyDictionary

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, ToolBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, CallToolRequestParams
from pydantic import Field

from .. import validate
from ..aio import AsyncSessionStore
from ..codec import JSON
from ..errors import InvalidInput
from ..models import Session
from .calls import Calls
from .errors import as_mcp, required_session_id
from .protocol import (
    CLOSE_METHOD,
    CLOSE_TOOL,
    EXTENSION_ID,
    HANDLE_ARGUMENT,
    IDEMPOTENCY_ARGUMENT,
    OPEN_METHOD,
    OPEN_TOOL,
    SESSION_ID_KEY,
    TOOL_CALL_ID_KEY,
    CloseSessionParams,
    CloseSessionResult,
    OpenedSession,
    OpenSessionParams,
    OpenSessionResult,
    SessionHandle,
)
from .routing import Routing
from .sessions import DEFAULT_IDLE_SECONDS, Sessions
from .tool_session import current_session

_ATTACHED: WeakKeyDictionary[MCPServer, SessionStoreExtension] = WeakKeyDictionary()


class SessionStoreExtension(Extension):
    """Sessions in the table and at-most-once tool calls, on any ``MCPServer``.

    ``lease_seconds``: how long a claim stays "in progress" before a repeat is told "outcome
    unknown" -- longer than the slowest tool. ``default_ttl_seconds`` / ``max_ttl_seconds``
    bound what a session may ask for: its absolute cap. ``idle_seconds``: a session also
    expires after this long without a request that wrote to it (default 1800, the SDK's own
    ``DEFAULT_SESSION_IDLE_TIMEOUT``; None: only the cap): claims move the deadline on at no
    extra request, and a session check (a read-only tool's, the legacy layer's) touches it at
    most once per half idle period. ``open_tool`` / ``close_tool``: the names of the tools it
    contributes for clients that know no custom method (None: not contributed);
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
        validate.ttl(lease_seconds, name="lease_seconds")
        validate.ttl(max_ttl_seconds, name="max_ttl_seconds")
        validate.ttl(default_ttl_seconds, name="default_ttl_seconds")
        validate.optional_int_in("idle_seconds", idle_seconds, 1, validate.MAX_TTL_SECONDS)
        if default_ttl_seconds > max_ttl_seconds:
            raise InvalidInput("default_ttl_seconds must not exceed max_ttl_seconds")
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
        self.open_tool = open_tool
        self.close_tool = close_tool
        self.handle_argument = handle_argument
        self.idempotency_argument = idempotency_argument
        self.sessions = Sessions(
            store,
            default_ttl_seconds=default_ttl_seconds,
            max_ttl_seconds=max_ttl_seconds,
            idle_seconds=idle_seconds,
        )
        self.calls = Calls(store, self.sessions, self.lease_ms)
        self.routing: Routing | None = None  # made by attach: it reads the server's tools

    def attach(self, server: MCPServer) -> None:
        """The server whose tools the interceptor validates and classifies."""
        self.routing = Routing(
            server,
            self.store.ids,
            handle_argument=self.handle_argument,
            idempotency_argument=self.idempotency_argument,
            open_tool=self.open_tool,
            close_tool=self.close_tool,
        )
        _ATTACHED[server] = self

    @staticmethod
    def attached_to(server: MCPServer) -> SessionStoreExtension | None:
        """The extension ``attach``-ed to ``server``, if any."""
        return _ATTACHED.get(server)

    # What the legacy HTTP layer (``http_sessions``) asks of the sessions.

    async def open_session(
        self,
        *,
        ttl_seconds: int | None = None,
        session_id: str | None = None,
        attributes: dict[str, JSON] | None = None,
    ) -> Session:
        """``Sessions.open``: a new active session of the current principal."""
        return await self.sessions.open(
            ttl_seconds=ttl_seconds, session_id=session_id, attributes=attributes
        )

    async def finish_opening(self, session_id: str) -> Session:
        """``Sessions.finish_opening``: a created session of the current principal, activated."""
        return await self.sessions.finish_opening(session_id)

    async def session_for_request(self, session_id: str) -> Session:
        """``Sessions.for_request``: the live, active session of the current principal."""
        return await self.sessions.for_request(session_id)

    async def end_session(self, session_id: str, *, quiet: bool = False) -> Session:
        """``Sessions.end``: closing -> closed; closing a closed session again is a success."""
        return await self.sessions.end(session_id, quiet=quiet)

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

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        if self.routing is None:
            raise MCPError(
                INTERNAL_ERROR,
                "SessionStoreExtension is not attached to its server: call "
                "extension.attach(server) (create_server does)",
            )
        route = self.routing.route(params, ctx)
        if route is None:
            return await call_next(ctx)  # the SDK's own error, or no session: nothing written
        return await self.calls.serve(route, ctx, call_next)

    async def _open(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        assert isinstance(params, OpenSessionParams)
        session = await as_mcp(self.sessions.open(ttl_seconds=params.ttl_seconds))
        return OpenSessionResult(
            session_id=session.session_id, status=session.status.value, expires_at=session.ttl
        )

    async def _close(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        session_id = required_session_id(params.meta if params is not None else None)
        session = await as_mcp(self.sessions.end(session_id))
        return CloseSessionResult(session_id=session_id, status=session.status.value)

    def _open_tool_fn(self) -> Any:
        async def open_session(
            ttl_seconds: Annotated[int | None, Field(ge=1)] = None,
        ) -> OpenedSession:
            """Open a session: pass the session_id it returns to every tool that takes one,
            and close it with close_session when done. It expires at expires_at (epoch
            seconds) in any case."""
            session = await as_mcp(self.sessions.open(ttl_seconds=ttl_seconds))
            return OpenedSession(
                session_id=session.session_id, status=session.status.value, expires_at=session.ttl
            )

        return open_session

    def _close_tool_fn(self) -> Any:
        async def close_session(session_id: SessionHandle = None) -> OpenedSession:
            """Close the session: later calls with its session_id are refused."""
            current = current_session()  # the interceptor resolved and checked it
            session = await as_mcp(self.sessions.end(current.session_id))
            return OpenedSession(
                session_id=session.session_id, status=session.status.value, expires_at=session.ttl
            )

        return close_session
