"""Which session a ``tools/call`` runs in, under which key, and whether it is claimed.

MCP layer, the interceptor's first step (``extension``): decided from the request and the
server's own tools before anything is written, so a call the SDK will refuse anyway, or one
that names no session, costs no request. The session can be named three ways (a handle
argument, ``_meta``, the legacy ``Mcp-Session-Id``) and the key two (``_meta``, an idempotency
argument); the first one present wins. Arguments the call's record could not hold are refused
here, before any tool runs (``storable``). A later round of a multi-round-trip call brings its
claim along (``rounds``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolRequestParams
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .. import claims, codec
from ..errors import InvalidInput
from ..ids import IdFactory
from ..models import Session
from . import rounds
from .capabilities import check_client_capabilities
from .errors import HOW_TO_OPEN, checked_id, meta_id
from .protocol import SESSION_ID_KEY, SESSION_REQUIRED, SESSION_SCOPE_KEY, TOOL_CALL_ID_KEY
from .sessions import principal_owner


@dataclass(frozen=True)
class Route:
    """How one ``tools/call`` is served."""

    tool_name: str
    arguments: dict[str, Any]
    session_id: str
    owner: str | None
    tool_call_id: str  # "" when closing: that is no call in the session's history
    closing: bool  # the close tool: a lifecycle step, neither claimed nor recorded
    harmless: bool  # read-only or idempotent by the server's own annotations
    checked: Session | None  # read in this request (legacy layer): live and active
    resumed: claims.Claim | None  # claimed by an earlier round of this call
    round_number: int


@dataclass(frozen=True)
class Routing:
    """Routes by ``server``'s tools and the extension's tool and argument names; a call's key,
    when the client sends none, is drawn from ``ids``."""

    server: MCPServer
    ids: IdFactory
    handle_argument: str
    idempotency_argument: str
    open_tool: str | None
    close_tool: str | None

    def route(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any]
    ) -> Route | None:
        """This call's route, or None: the SDK serves it alone (it refuses the call, or the
        tool needs no session and was called without one)."""
        # 2.3.0 has no public lookup of one registered tool with its argument model.
        tool = self.server._tool_manager.get_tool(params.name)
        # SEP-2575: refused (-32021) before anything is claimed.
        check_client_capabilities(self.server, params.name, ctx)
        arguments: dict[str, Any] = dict(params.arguments or {})
        if tool is None or not valid(tool, arguments):
            return None
        declared = tool.parameters.get("properties", {})
        legacy = legacy_session(ctx)
        session_id = self._session_id(arguments, params.meta, legacy, declared)
        if session_id is None:
            if self.handle_argument in declared:
                raise self._session_required(params.name, ctx.protocol_version)
            return None
        if legacy is not None and legacy.session_id != session_id:
            legacy = None  # an explicit handle names another session: check that one
        # Before anything runs: what the record could not hold is refused, never run and lost.
        storable(arguments)
        closing = params.name == self.close_tool
        tool_call_id, resumed, round_number = "", None, 1
        if not closing:
            key = self._key(params.meta, arguments, declared)
            tool_call_id = key if key is not None else self.ids.token()
            # A later round of a multi-round-trip call we claimed carries its claim.
            resumed, round_number = rounds.resume(params, session_id, arguments) or (None, 1)
            if resumed is not None:
                tool_call_id = resumed.tool_call_id
        hints = tool.annotations
        # The server's own hints, so they can be trusted: re-running such a tool is harmless.
        harmless = hints is not None and bool(hints.read_only_hint or hints.idempotent_hint)
        return Route(
            tool_name=params.name,
            arguments=arguments,
            session_id=session_id,
            owner=principal_owner(),
            tool_call_id=tool_call_id,
            closing=closing,
            harmless=harmless,
            checked=legacy,
            resumed=resumed,
            round_number=round_number,
        )

    def _key(self, meta: Any, arguments: dict[str, Any], declared: dict[str, Any]) -> str | None:
        """``_meta``'s tool-call id, else the idempotency argument: the client's key, if any."""
        key = meta_id(meta, TOOL_CALL_ID_KEY)
        if key is None and self.idempotency_argument in declared:
            value = arguments.get(self.idempotency_argument)
            key = None if value is None else checked_id(value, self.idempotency_argument)
        return key

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


def storable(arguments: dict[str, Any]) -> None:
    """INVALID_PARAMS unless the call's record can hold ``arguments``: a client's ``1e400`` or
    ``NaN`` parses as a float JSON cannot write, ``"\\ud800"`` as a lone surrogate. Refused
    here, before any request: the claim's fingerprint would refuse them too, but as a store
    error, and a harmless tool's only once it had run (it is recorded after it runs)."""
    try:
        codec.encode(arguments, "arguments")
    except InvalidInput as exc:
        raise MCPError(
            INVALID_PARAMS, str(exc), {"reason": "invalid_input", "argument": "arguments"}
        ) from None


def legacy_session(ctx: ServerRequestContext[Any, Any]) -> Session | None:
    """The session ``http_sessions.LegacySessions`` checked for this HTTP request, if any."""
    scope = getattr(ctx.request, "scope", None)
    session = scope.get(SESSION_SCOPE_KEY) if isinstance(scope, dict) else None
    return session if isinstance(session, Session) else None
