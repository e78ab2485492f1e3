"""The two ASGI steps the legacy session layer and the back channel share: read a request's
body ahead of the app, and answer with a status and a JSON-RPC error.

Layer: MCP, under ``http_sessions`` and ``back_channel``. Why: both look at a POST before the
SDK does (an ``initialize``, an answer to an ask), and both answer what they refuse themselves,
in the SDK's own shape.
"""

from __future__ import annotations

import json
from typing import Final

from starlette.types import Message, Receive, Send

#: The SDK's own request body bound (``DEFAULT_MAX_REQUEST_BODY_SIZE``).
MAX_BODY_BYTES: Final = 4 * 1024 * 1024


async def buffer_body(receive: Receive) -> tuple[bytes | None, Receive]:
    """The whole request body (None past ``MAX_BODY_BYTES``) and a receive that replays it."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None, receive
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return body, replay


async def status(send: Send, code: int, message: str | None) -> None:
    """Answer ``code``, with a JSON-RPC error saying ``message`` (none: an empty body)."""
    headers: list[tuple[bytes, bytes]] = [(b"content-type", b"application/json")]
    if code == 405:
        headers.append((b"allow", b"POST, DELETE"))
    body = b""
    if message is not None:
        error = {"code": -32603 if code >= 500 else -32600, "message": message}
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    await send({"type": "http.response.start", "status": code, "headers": headers})
    await send({"type": "http.response.body", "body": body})
