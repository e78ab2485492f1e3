"""The 2025-11-25 fixtures that send the client a request in the middle of a ``tools/call``:
``test_sampling`` and ``test_elicitation*``.

Layer: the conformance server, under ``fixtures``, which registers these; they reach the client
only through the SDK's session, which the store's back channel (``sessionstore.mcp.back_channel``)
carries. Why a module of its own: these are the handshake-era way to ask the client, the only
fixtures that wait mid-call for an answer. In a session kept in the table, the answer comes back
through the table to whichever instance waits for it. A server without the store has no back
channel on its stateless transport: the tools refuse with a clear ``isError`` result instead of
hanging, and so does a wait that ends without an answer.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types import CallToolResult, ClientCapabilities, SamplingMessage, TextContent
from pydantic import Field

from .content import _ELICITATION, _SAMPLING, Ctx, _text


def _require_back_channel(ctx: Ctx, what: str, capability: ClientCapabilities) -> None:
    # Refuse before sending: a request that cannot be answered would only surface later as a
    # transport error, and the client would see a failed call with no reason.
    if not ctx.session.can_send_request:
        raise ToolError(
            f"{what} needs a server-to-client request, which a stateless server cannot send: "
            "the client's answer has no connection to come back to (NoBackChannelError)"
        )
    if not ctx.session.check_client_capability(capability):
        raise ToolError(f"the client did not declare the {what} capability")


async def sampling(
    prompt: Annotated[str, Field(description="The prompt to send to the LLM")], ctx: Context
) -> CallToolResult:
    """Tests server-initiated sampling (LLM completion request)."""
    _require_back_channel(ctx, "sampling", _SAMPLING)
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    try:
        result = await ctx.session.create_message(
            [message], max_tokens=100, related_request_id=ctx.request_id
        )
    except NoBackChannelError as exc:
        raise ToolError(f"sampling is not possible on this connection: {exc}") from exc
    except MCPError as exc:  # no answer in time, the session ended, the client refused
        raise ToolError(f"sampling failed: {exc}") from exc
    reply = result.content.text if isinstance(result.content, TextContent) else "No response"
    return _text(f"LLM response: {reply}")


async def _elicit(ctx: Ctx, message: str, schema: dict[str, Any], label: str) -> CallToolResult:
    _require_back_channel(ctx, "elicitation", _ELICITATION)
    try:
        result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    except NoBackChannelError as exc:
        raise ToolError(f"elicitation is not possible on this connection: {exc}") from exc
    except MCPError as exc:
        raise ToolError(f"elicitation failed: {exc}") from exc
    return _text(f"{label}: action={result.action}, content={json.dumps(result.content or {})}")


_USER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}

_DEFAULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
    "required": [],
}

_ENUMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {
            "type": "string",
            "description": "Select one option",
            "enum": ["option1", "option2", "option3"],
        },
        "titledSingle": {
            "type": "string",
            "description": "Select one option with titles",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "description": "Select multiple options",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "description": "Select multiple options with titles",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
    "required": [],
}


async def elicitation(
    message: Annotated[str, Field(description="The message to show the user")], ctx: Context
) -> CallToolResult:
    """Tests server-initiated elicitation (user input request)."""
    return await _elicit(ctx, message, _USER_SCHEMA, "User response")


async def elicitation_sep1034_defaults(ctx: Ctx) -> CallToolResult:
    """Tests elicitation with default values per SEP-1034."""
    message = "Please review and update the form fields with defaults"
    return await _elicit(ctx, message, _DEFAULTS_SCHEMA, "Elicitation completed")


async def elicitation_sep1330_enums(ctx: Ctx) -> CallToolResult:
    """Tests elicitation with enum schema improvements per SEP-1330."""
    message = "Please select options from the enum fields"
    return await _elicit(ctx, message, _ENUMS_SCHEMA, "Elicitation completed")
