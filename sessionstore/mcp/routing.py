"""Which session a ``tools/call`` runs in, under which key, and whether it is claimed.

Decided before anything is written, so a call the SDK will refuse anyway, or one that names no
session, costs no request. The session can be named three ways (a handle argument, ``_meta``, the
legacy ``Mcp-Session-Id``) and the key two (``_meta``, an idempotency argument); the first one
present wins. ``CallRouting`` is a mixin of ``SessionStoreExtension`` (``middleware``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, CallToolRequestParams
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from ..aio import AsyncSessionStore
from ..models import Session
from .mcp_errors import HOW_TO_OPEN, checked_id, meta_id
from .protocol import SESSION_ID_KEY, SESSION_REQUIRED, SESSION_SCOPE_KEY, TOOL_CALL_ID_KEY


@dataclass(frozen=True)
class Route:
    """How one ``tools/call`` is served."""

    session_id: str
    owner: str | None
    tool_call_id: str
    keyed: bool  # the id came from the client: a retry carries it again
    harmless: bool  # read-only or idempotent by the server's own annotations
    checked: Session | None  # read in this request (legacy layer): live and active


class CallRouting:
    """How the extension routes a ``tools/call``, by its own settings and its server's tools."""

    store: AsyncSessionStore
    open_tool: str | None
    handle_argument: str
    idempotency_argument: str
    _server: MCPServer | None

    def _route(
        self,
        params: CallToolRequestParams,
        arguments: dict[str, Any],
        declared: dict[str, Any],
        tool: Tool,
        session_id: str,
        owner: str | None,
        legacy: Session | None,
    ) -> Route:
        key = meta_id(params.meta, TOOL_CALL_ID_KEY)
        if key is None and self.idempotency_argument in declared:
            value = arguments.get(self.idempotency_argument)
            key = None if value is None else checked_id(value, self.idempotency_argument)
        hints = tool.annotations
        # The server's own hints, so they can be trusted: re-running such a tool is harmless.
        harmless = hints is not None and bool(hints.read_only_hint or hints.idempotent_hint)
        return Route(
            session_id=session_id,
            owner=owner,
            tool_call_id=key if key is not None else self.store.ids.token(),
            keyed=key is not None,
            harmless=harmless,
            checked=legacy,
        )

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
            return checked_id(arguments[self.handle_argument], self.handle_argument)
        from_meta = meta_id(meta, SESSION_ID_KEY)
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
            how = HOW_TO_OPEN
        if protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            how = f"initialize again to get an Mcp-Session-Id, or {how}"
        return MCPError(
            SESSION_REQUIRED,
            f"tool {name!r} needs a session: {how}",
            {"reason": "session_required", "argument": self.handle_argument, "key": SESSION_ID_KEY},
        )


def valid(tool: Tool, arguments: dict[str, Any]) -> bool:
    """Whether the SDK will accept these arguments (its own validation, run early)."""
    try:
        tool.fn_metadata.validate_arguments(arguments)
    except Exception:
        return False
    return True


def legacy_session(ctx: ServerRequestContext[Any, Any]) -> Session | None:
    """The session ``http_sessions.LegacySessions`` checked for this HTTP request, if any."""
    scope = getattr(ctx.request, "scope", None)
    session = scope.get(SESSION_SCOPE_KEY) if isinstance(scope, dict) else None
    return session if isinstance(session, Session) else None
