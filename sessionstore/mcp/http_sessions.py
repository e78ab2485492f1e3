"""Legacy ``Mcp-Session-Id`` sessions kept in the table, for every unmodified client.

The SDK keeps a 2024-11-05 ... 2025-11-25 session in one process's memory, where another
instance cannot see it, and a stateless transport ignores the header. So this ASGI layer in front
of the stateless app does the session part on the store: ``initialize`` creates it and returns
its id; a later request is checked (any refusal is HTTP 404, the spec's signal to start a new
session) and hands it on in the ASGI scope (``SESSION_SCOPE_KEY``); ``DELETE`` closes it. ``GET``
gets 405: holding the standalone stream open would tie the client to one instance. A
2026-07-28+ request has no session in the protocol and passes through.

Only the store failing (``Unavailable``) is a 503: the session may be fine, so the client should
retry, not start over.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Final

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import (
    InvalidInput,
    SessionAlreadyExists,
    SessionNotActive,
    SessionNotFound,
    SessionStoreError,
    Unavailable,
)
from ..ids import validate_id
from ..lifecycle import Status
from ..models import Session
from .protocol import SESSION_SCOPE_KEY

if TYPE_CHECKING:
    from .middleware import SessionStoreExtension

SESSION_HEADER: Final = b"mcp-session-id"
_VERSION_HEADER: Final = b"mcp-protocol-version"
#: The SDK's own request body bound (``DEFAULT_MAX_REQUEST_BODY_SIZE``).
MAX_BODY_BYTES: Final = 4 * 1024 * 1024

logger = logging.getLogger(__name__)


class LegacySessions:
    """ASGI middleware: ``Mcp-Session-Id`` minted, checked and closed in the store.
    ``adopt_ids``: an unknown id gets a session, for a host in front (e.g. AgentCore Runtime)
    that mints them itself."""

    def __init__(
        self, app: ASGIApp, extension: SessionStoreExtension, *, adopt_ids: bool = False
    ) -> None:
        self.app = app
        self.extension = extension
        self.adopt_ids = adopt_ids

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or ())
        version = headers.get(_VERSION_HEADER, b"").decode("latin-1")
        # Not HTTP, or 2026-07-28+ (sessionless by design): nothing to do.
        if scope["type"] != "http" or (version and version not in HANDSHAKE_PROTOCOL_VERSIONS):
            await self.app(scope, receive, send)
            return
        raw_id = headers[SESSION_HEADER].decode("latin-1") if SESSION_HEADER in headers else None
        method = scope["method"]
        if method == "GET":
            await _status(send, 405, "this server offers no standalone event stream")
            return
        if method == "DELETE":
            await self._delete(raw_id, send)
            return
        if method == "POST" and raw_id is None:
            body, receive = await _buffer(receive)
            if body is None:
                await _status(send, 413, "request body too large")
                return
            initialize = _initialize_params(body)
            if initialize is not None:
                await self._initialize(scope, receive, send, initialize)
                return
        elif method == "POST" and raw_id is not None:
            try:
                session = await self._check(raw_id)
            except Unavailable as exc:  # the store, not the session: the client may retry
                await _status(send, 503, f"session store unavailable: {exc}")
                return
            if session is None:
                await _status(send, 404, "Session not found")
                return
            scope[SESSION_SCOPE_KEY] = session
        await self.app(scope, receive, send)

    async def _initialize(
        self, scope: Scope, receive: Receive, send: Send, params: dict[str, Any]
    ) -> None:
        client = params.get("clientInfo")
        attributes = {
            "protocolVersion": params.get("protocolVersion"),
            "clientInfo": client,
            "clientCapabilities": params.get("capabilities"),
        }
        try:
            session = await self.extension.open_session(attributes=attributes)
        except SessionStoreError as exc:
            logger.warning("initialize: no session could be created: %s", exc)
            await _status(send, 503, f"session store unavailable: {exc}")
            return
        status = 0

        async def with_session_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                header = (SESSION_HEADER, session.session_id.encode())
                message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        await self.app(scope, receive, with_session_id)
        if status >= 400:  # the SDK refused the handshake: nothing to keep
            await self.extension.end_session(session.session_id, quiet=True)
            return
        logger.info(
            "session %s opened for %s (protocol %s, client %s)",
            session.session_id,
            session.owner or "an anonymous principal",
            attributes["protocolVersion"],
            client.get("name") if isinstance(client, dict) else None,
        )

    async def _check(self, raw_id: str) -> Session | None:
        """The session ``raw_id`` names, or None: refused (404). ``Unavailable`` is raised (503):
        the session may well be there, and an adopted id is still the client's to retry."""
        try:
            session_id = validate_id(raw_id, "Mcp-Session-Id")
        except InvalidInput as exc:
            logger.info("request refused with 404: %s", exc)
            return None
        return await self._session(session_id, adopt=self.adopt_ids)

    async def _session(self, session_id: str, *, adopt: bool) -> Session | None:
        try:
            return await self.extension.session_for_request(session_id)
        except SessionNotFound:
            if adopt:
                return await self._adopt(session_id)
            logger.info("request for unknown session %s: 404", session_id)
        except SessionNotActive as exc:
            if self.adopt_ids and exc.current is Status.INITIALIZING:
                # An adoption that stopped between its two writes (the store failed): finish it.
                return await self._adopted(session_id, self.extension.finish_opening(session_id))
            logger.info("request refused with 404: %s", exc)
        except Unavailable:
            raise
        except SessionStoreError as exc:  # expired
            logger.info("request refused with 404: %s", exc)
        return None

    async def _adopt(self, session_id: str) -> Session | None:
        try:
            return await self._adopted(
                session_id, self.extension.open_session(session_id=session_id)
            )
        except SessionAlreadyExists:
            # Another instance adopted it first (or an expired one still holds the id): taken as
            # it is, never adopted again.
            return await self._session(session_id, adopt=False)

    async def _adopted(self, session_id: str, opening: Awaitable[Session]) -> Session | None:
        try:
            session = await opening
        except (Unavailable, SessionAlreadyExists):
            raise
        except SessionStoreError as exc:
            logger.info("session %s could not be adopted: %s", session_id, exc)
            return None
        logger.info("session %s adopted from the platform in front", session_id)
        return session

    async def _delete(self, raw_id: str | None, send: Send) -> None:
        if raw_id is None:
            await _status(send, 400, "DELETE needs an Mcp-Session-Id")
            return
        try:
            session_id = validate_id(raw_id, "Mcp-Session-Id")
            closed = await self.extension.end_session(session_id)
        except Unavailable as exc:
            await _status(send, 503, f"session store unavailable: {exc}")
            return
        except SessionStoreError as exc:
            logger.info("DELETE refused with 404: %s", exc)
            await _status(send, 404, "Session not found")
            return
        logger.info("session %s closed by the client (DELETE)", closed.session_id)
        await _status(send, 200, None)


def _initialize_params(body: bytes) -> dict[str, Any] | None:
    """The params of a single JSON-RPC ``initialize`` request, or None for anything else."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    if "id" not in message:  # a notification
        return None
    params = message.get("params")
    return params if isinstance(params, dict) else {}


async def _buffer(receive: Receive) -> tuple[bytes | None, Receive]:
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


async def _status(send: Send, status: int, message: str | None) -> None:
    headers: list[tuple[bytes, bytes]] = [(b"content-type", b"application/json")]
    if status == 405:
        headers.append((b"allow", b"POST, DELETE"))
    body = b""
    if message is not None:
        code = -32600 if status != 503 else -32603
        body = json.dumps(
            {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
        ).encode()
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def install(manager: Any, extension: SessionStoreExtension, *, adopt_ids: bool = False) -> None:
    """Put ``LegacySessions`` in front of a stateless ``StreamableHTTPSessionManager``'s
    ``asgi_app``: inside the SDK's auth middleware, so the principal is known."""
    manager.asgi_app = LegacySessions(manager.asgi_app, extension, adopt_ids=adopt_ids)


__all__ = ["SESSION_HEADER", "LegacySessions", "install"]
