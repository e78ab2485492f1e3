"""Client capabilities a tool relies on, checked before the call is claimed (SEP-2575).

MCP layer, beside the claim. On 2026-07-28 a client declares its capabilities on every request
(``_meta["io.modelcontextprotocol/clientCapabilities"]``), and a server MUST NOT rely on one it
did not declare: it answers ``-32021`` (MissingRequiredClientCapabilityError, HTTP 400) with
``data.requiredCapabilities`` naming what is missing. ``MCPServer`` does this only for its own
resolvers (``ctx.elicit`` and friends); a tool that asks through a hand-written
``InputRequiredResult`` says what it needs here, once, at registration.

Checked in the store's ``tools/call`` interceptor before anything is claimed or written, like
the SDK's own errors for an unknown tool or invalid arguments: a refusal leaves no trace in the
table, and a client that retries with the capability declared gets a fresh call.

Only modern requests are checked. A handshake-era client declared its capabilities once, at
``initialize``; the store keeps them as session attributes, and a session's requests are served
with them (``back_channel``), so a tool asks ``ctx.session.check_client_capability`` itself.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ClientCapabilities,
    MissingRequiredClientCapabilityErrorData,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

__all__ = [
    "check_client_capabilities",
    "require_client_capabilities",
    "required_client_capabilities",
]

_REQUIRED: WeakKeyDictionary[MCPServer, dict[str, ClientCapabilities]] = WeakKeyDictionary()


def require_client_capabilities(
    server: MCPServer, tool_name: str, capabilities: ClientCapabilities
) -> None:
    """Declare that ``tool_name`` on ``server`` relies on ``capabilities`` (each set field is
    one capability the client must have declared)."""
    _REQUIRED.setdefault(server, {})[tool_name] = capabilities


def required_client_capabilities(server: MCPServer, tool_name: str) -> ClientCapabilities | None:
    """What ``tool_name`` was declared to rely on, if anything."""
    return _REQUIRED.get(server, {}).get(tool_name)


def check_client_capabilities(
    server: MCPServer, tool_name: str, ctx: ServerRequestContext[Any, Any]
) -> None:
    """Raise ``-32021`` when a modern request's client did not declare what the tool needs."""
    required = required_client_capabilities(server, tool_name)
    if required is None or ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
        return
    declared = ctx.session.client_capabilities or ClientCapabilities()
    # Top-level capabilities only: a tool that needs a sub-capability (sampling.tools,
    # elicitation.url) checks that itself, as the SDK's resolvers do.
    missing = {
        name: getattr(required, name)
        for name in ClientCapabilities.model_fields
        if getattr(required, name) is not None and getattr(declared, name) is None
    }
    if not missing:
        return
    data = MissingRequiredClientCapabilityErrorData(
        required_capabilities=ClientCapabilities(**missing)
    )
    raise MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=(
            f"tool {tool_name!r} needs the client capabilit"
            f"{'y' if len(missing) == 1 else 'ies'} {', '.join(sorted(missing))}, "
            "which this request did not declare"
        ),
        data=data.model_dump(by_alias=True, mode="json", exclude_none=True),
    )
