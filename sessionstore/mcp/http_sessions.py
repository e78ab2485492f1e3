"""Legacy ``Mcp-Session-Id`` sessions kept in the table, for every unmodified client.

The SDK keeps a 2024-11-05 ... 2025-11-25 session in one process's memory, where another
instance cannot see it, and a stateless transport ignores the header. So this ASGI layer in front
of the stateless app does the session part on the store: ``initialize`` creates it and returns
its id; a later request is checked (any refusal is HTTP 404, the spec's signal to start a new
session) and hands it on in the ASGI scope (``SESSION_SCOPE_KEY``); ``DELETE`` closes it. ``GET``
gets 405: holding the standalone stream open would tie the client to one instance. A
2026-07-28+ request has no session in the protocol and passes through.

Only the store failing (``Unavailable``) is a 503: the session may be fine, so the client should
retry, not start over. What the client sent never is: a body the SDK refuses goes on to the SDK,
which answers it, and of an ``initialize`` the SDK accepts, what the store cannot keep is left
out of the session's attributes (``handshake_attributes``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Iterator
from typing import TYPE_CHECKING, Any, Final

import pydantic_core
from mcp_types import JSONRPCRequest, jsonrpc_message_adapter
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import codec
from ..attributes import attribute_texts
from ..codec import JSON
from ..errors import (
    InvalidInput,
    ItemTooLarge,
    SessionAlreadyExists,
    SessionNotActive,
    SessionNotFound,
    SessionStoreError,
    Unavailable,
)
from ..ids import validate_id
from ..item import ATTRIBUTES_MAX_BYTES
from ..models import Session, Status
from . import asgi
from .back_channel import DEFAULT_WAIT_SECONDS, BackChannel
from .protocol import SESSION_SCOPE_KEY

if TYPE_CHECKING:
    from .extension import SessionStoreExtension

SESSION_HEADER: Final = b"mcp-session-id"
_VERSION_HEADER: Final = b"mcp-protocol-version"
#: Longer is no protocol version at all (the SDK answers with one of its own): not kept.
_MAX_VERSION_CHARS: Final = 64
#: The members of ``clientInfo`` that name the client: kept when the rest does not fit.
_CLIENT_NAMING: Final = ("name", "version", "title")
#: Each of those is cut to this many characters when even they do not fit whole.
_MAX_NAMING_CHARS: Final = 128

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
            await asgi.status(send, 405, "this server offers no standalone event stream")
            return
        if method == "DELETE":
            await self._delete(raw_id, send)
            return
        if method == "POST" and raw_id is None:
            body, receive = await asgi.buffer_body(receive)
            if body is None:
                await asgi.status(send, 413, "request body too large")
                return
            initialize = _initialize_params(body)
            if initialize is not None:
                await self._initialize(scope, receive, send, initialize)
                return
        elif method == "POST" and raw_id is not None:
            try:
                session = await self._check(raw_id)
            except Unavailable as exc:  # the store, not the session: the client may retry
                await asgi.status(send, 503, f"session store unavailable: {exc}")
                return
            if session is None:
                await asgi.status(send, 404, "Session not found")
                return
            scope[SESSION_SCOPE_KEY] = session
        await self.app(scope, receive, send)

    async def _initialize(
        self, scope: Scope, receive: Receive, send: Send, params: dict[str, Any]
    ) -> None:
        attributes, left_out = handshake_attributes(params)
        try:
            session = await self.extension.open_session(attributes=attributes)
        except Unavailable as exc:
            logger.warning("initialize: no session could be created: %s", exc)
            await asgi.status(send, 503, f"session store unavailable: {exc}")
            return
        except SessionStoreError as exc:  # not the client's doing, and no retry will help
            logger.error("initialize: no session could be created: %s", exc)
            await asgi.status(send, 500, "no session could be created")
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
            # The answer is sent already; end_session logs a failure (quiet) and TTL removes it.
            with contextlib.suppress(SessionStoreError):
                await self.extension.end_session(session.session_id, quiet=True)
            return
        client = attributes.get("clientInfo")
        logger.info(
            "session %s opened for %s (protocol %s, client %s)",
            session.session_id,
            session.owner or "an anonymous principal",
            attributes.get("protocolVersion"),
            client.get("name") if isinstance(client, dict) else None,
        )
        if left_out:
            logger.info(
                "session %s: left out of its attributes, as more than the store keeps (%d bytes)"
                " or not writable as JSON: %s",
                session.session_id,
                ATTRIBUTES_MAX_BYTES,
                "; ".join(left_out),
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
            await asgi.status(send, 400, "DELETE needs an Mcp-Session-Id")
            return
        try:
            session_id = validate_id(raw_id, "Mcp-Session-Id")
            closed = await self.extension.end_session(session_id)
        except Unavailable as exc:
            await asgi.status(send, 503, f"session store unavailable: {exc}")
            return
        except SessionStoreError as exc:
            logger.info("DELETE refused with 404: %s", exc)
            await asgi.status(send, 404, "Session not found")
            return
        logger.info("session %s closed by the client (DELETE)", closed.session_id)
        await asgi.status(send, 200, None)


def _initialize_params(body: bytes) -> dict[str, Any] | None:
    """The params of a single JSON-RPC ``initialize`` request, or None for anything else. Read
    with the SDK's own parser and message model, so that what the SDK refuses (malformed JSON,
    nesting past its parser's limit, a lone surrogate, an invalid message) goes on to the SDK,
    which answers it as it always does."""
    try:
        message = jsonrpc_message_adapter.validate_python(
            pydantic_core.from_json(body), by_name=False
        )
    except ValueError:  # pydantic's ValidationError is one
        return None
    if not isinstance(message, JSONRPCRequest) or message.method != "initialize":
        return None  # a notification named initialize is no handshake either
    return message.params or {}


def handshake_attributes(params: dict[str, Any]) -> tuple[dict[str, JSON], list[str]]:
    """The session attributes for an ``initialize``'s params, and what of them was left out.

    The client sent them and the SDK took them, so what the store cannot keep (its attributes
    are exact JSON, ``ATTRIBUTES_MAX_BYTES`` in all) is left out, never the session refused:
    members the JSON writer refuses (NaN and Infinity, which the SDK's parser reads), then as
    long as they do not fit: ``clientInfo``'s icons (one data URI can be past the limit), the
    rest of it but its name, version and title, the capabilities, the length of those three,
    and last ``clientInfo`` itself. A protocol version is kept if it is a short string.
    """
    left_out: list[str] = []
    attributes: dict[str, JSON] = {}
    version = params.get("protocolVersion")
    if isinstance(version, str) and len(version) <= _MAX_VERSION_CHARS and _writable(version):
        attributes["protocolVersion"] = version
    elif version is not None:
        left_out.append("protocolVersion")
    for name, key in (("clientInfo", "clientInfo"), ("clientCapabilities", "capabilities")):
        value = _writable_part(params.get(key), name, left_out)
        if value is not None:
            attributes[name] = value
    # Checked before each step; what the last step leaves (a short version at most) fits.
    for step, smaller in _reductions(attributes):
        if _fits(attributes):
            break
        left_out.append(step)
        attributes = smaller
    return attributes, left_out


def _writable(value: object) -> bool:
    try:
        codec.encode(value)
    except InvalidInput:
        return False
    return True


def _writable_part(value: object, name: str, left_out: list[str]) -> JSON:
    """``value`` if the store can write it; of an object, the members it can write."""
    if value is None or _writable(value):
        return value
    if not isinstance(value, dict):
        left_out.append(name)
        return None
    kept = {k: v for k, v in value.items() if _writable(k) and _writable(v)}
    left_out.extend(f"{name}.{k!r:.40}" for k in value if k not in kept)
    return kept


def _fits(attributes: dict[str, JSON]) -> bool:
    """The store's own check of a session's first attributes (``create_session`` runs it)."""
    try:
        attribute_texts(attributes, "attributes")
    except ItemTooLarge:
        return False
    return True


def _reductions(attributes: dict[str, JSON]) -> Iterator[tuple[str, dict[str, JSON]]]:
    """Each smaller form of ``attributes`` in turn, with what it leaves out."""
    client = attributes.get("clientInfo")
    if isinstance(client, dict):
        if "icons" in client:
            client = {k: v for k, v in client.items() if k != "icons"}
            attributes = {**attributes, "clientInfo": client}
            yield "clientInfo.icons", attributes
        naming = {k: client[k] for k in _CLIENT_NAMING if isinstance(client.get(k), str)}
        if naming != client:
            client = naming
            attributes = {**attributes, "clientInfo": client}
            yield "clientInfo but its name, version and title", attributes
    if "clientCapabilities" in attributes:
        attributes = {k: v for k, v in attributes.items() if k != "clientCapabilities"}
        yield "clientCapabilities", attributes
    if isinstance(client, dict):
        cut = {k: v[:_MAX_NAMING_CHARS] for k, v in client.items()}
        attributes = {**attributes, "clientInfo": cut}
        yield (
            f"clientInfo's name, version and title past {_MAX_NAMING_CHARS} characters",
            attributes,
        )
    if "clientInfo" in attributes:
        yield "clientInfo", {k: v for k, v in attributes.items() if k != "clientInfo"}


def install(
    manager: Any,
    extension: SessionStoreExtension,
    *,
    adopt_ids: bool = False,
    answer_wait_seconds: float | None = None,
) -> None:
    """Put ``LegacySessions`` in front of a stateless ``StreamableHTTPSessionManager``'s
    ``asgi_app`` (inside the SDK's auth middleware, so the principal is known), and serve a
    session's requests with a back channel through the table (``back_channel``): a tool waits
    at most ``answer_wait_seconds`` for the client's answer to each request it sends -- by
    default ``DEFAULT_WAIT_SECONDS``, or 80 % of the extension's lease if that is shorter, since
    the call stays claimed while its tool waits."""
    lease_seconds = extension.lease_ms / 1000
    if answer_wait_seconds is None:
        answer_wait_seconds = min(DEFAULT_WAIT_SECONDS, 0.8 * lease_seconds)
    elif answer_wait_seconds >= lease_seconds:
        raise InvalidInput(
            f"answer_wait_seconds ({answer_wait_seconds:g}) must be shorter than the extension's"
            f" lease ({lease_seconds:g} s): the call stays claimed while its tool waits"
        )
    back_channel = BackChannel(extension.store, answer_wait_seconds)
    back_channel.install(manager)
    manager.asgi_app = LegacySessions(manager.asgi_app, extension, adopt_ids=adopt_ids)
