"""The client side, on the SDK's own ``mcp.Client``: open a session, call tools in it, close it.

    async with Client(url) as client:
        session = await open_session(client)
        calls = SessionCalls(client, session.session_id)
        result = await calls.call("calculate", {"expression": "6 * 7"})
        await close_session(client, session.session_id)

A retry must reuse the tool-call id of the call it repeats (``tool_call_id=``): that is what
makes the server answer with the stored result instead of running the tool again.
"""

from __future__ import annotations

import uuid
from typing import Any

import mcp_types as types
from mcp import Client

from .protocol import (
    CLOSE_METHOD,
    OPEN_METHOD,
    SESSION_ID_KEY,
    TOOL_CALL_ID_KEY,
    CloseSessionParams,
    CloseSessionResult,
    OpenSessionParams,
    OpenSessionResult,
)


def call_meta(session_id: str, tool_call_id: str | None = None) -> dict[str, Any]:
    """The ``_meta`` a request in a store-backed session carries."""
    meta: dict[str, Any] = {SESSION_ID_KEY: session_id}
    if tool_call_id is not None:
        meta[TOOL_CALL_ID_KEY] = tool_call_id
    return meta


async def open_session(client: Client, *, ttl_seconds: int | None = None) -> OpenSessionResult:
    request = types.Request[OpenSessionParams, str](
        method=OPEN_METHOD, params=OpenSessionParams(ttl_seconds=ttl_seconds)
    )
    return await client.session.send_request(request, OpenSessionResult)


async def close_session(client: Client, session_id: str) -> CloseSessionResult:
    params = CloseSessionParams.model_validate({"_meta": call_meta(session_id)})
    request = types.Request[CloseSessionParams, str](method=CLOSE_METHOD, params=params)
    return await client.session.send_request(request, CloseSessionResult)


class SessionCalls:
    """Tool calls in one session: each gets a fresh tool-call id unless one is given."""

    def __init__(self, client: Client, session_id: str) -> None:
        self.client = client
        self.session_id = session_id

    async def call(
        self, name: str, arguments: dict[str, Any] | None = None, *, tool_call_id: str | None = None
    ) -> types.CallToolResult:
        call_id = tool_call_id if tool_call_id is not None else uuid.uuid4().hex
        return await self.client.call_tool(
            name,
            arguments,
            meta=call_meta(self.session_id, call_id),  # type: ignore[arg-type]
        )
