"""Server-to-client requests in a handshake-era session, answered through the table.

Layer: MCP, over the core's ``asks``; ``http_sessions`` installs it. Why: a tool in a 2025-11-25
session may ask the client mid-call (``ctx.session.create_message``, ``elicit_form``). The SDK
writes the request to the call's own response stream and waits in memory for the answer; but the
client's answer is a new POST, which behind a load balancer reaches any instance, and a
stateless transport has no memory to wait in. So a session's requests are served here:

* on the asking instance, between the call's transport and the SDK's dispatcher (``relay``):
  the request's JSON-RPC id is replaced by an ask id (``ASK_ID_PREFIX`` + the time + a token,
  unique across instances), the ask is opened in the table (``asks.ask``, 1 WCU), and the call
  polls for its answer (``asks.poll``: one consistent Query, 1 RCU) on a schedule that slows to
  once a second: ``POLLS`` -- 5 reads in the first 1.55 s, then 1 read a second of waiting. The
  answer read, it is removed from the ask (``asks.settle``, 1 WCU);
* on whichever instance the answer reaches: the POST is checked as the SDK's transport checks
  it (Host, Origin, Accept, Content-Type, JSON-RPC), then written into the ask, the first answer
  only (``asks.answer``), and answered 202 once it is in the table -- 503 if the store failed,
  so the client may send it again;
* meanwhile the call's claim stays "in progress": its lease is renewed when an ask is opened or
  a poll finds no answer, once less than half of it is left (``lease_keeper``: 1 WCU per half lease
  spent asking).

The wait is bounded (``wait_seconds``, 240 by default: then the tool sees a timeout error), each
ask on its own, and ends with a clear error as soon as a poll finds the session closing, closed,
expired or gone. Nothing of the relay's may fail the server: a client that disconnects mid-call
ends that call alone.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import anyio
import pydantic_core
from anyio.abc import TaskStatus
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import StreamableHTTPServerTransport, check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    JSONRPCError,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from .. import asks, codec
from ..aio import AsyncSessionStore
from ..errors import InvalidInput, ItemTooLarge, Unavailable
from ..models import Session
from . import asgi
from .lease_keeper import LEASE_SCOPE_KEY, Held
from .protocol import SESSION_SCOPE_KEY
from .relay import ASK_ID_PREFIX, Relay

#: Below the extension's default lease (300 s): the call stays claimed while its tool waits.
DEFAULT_WAIT_SECONDS: Final = 240.0

logger = logging.getLogger(__name__)

Handler = Callable[[str | None, Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class BackChannel:
    """Serves a legacy session's calls with a back channel through the table (module doc)."""

    store: AsyncSessionStore
    wait_seconds: float = DEFAULT_WAIT_SECONDS

    def __post_init__(self) -> None:
        if isinstance(self.wait_seconds, bool) or not (0 < self.wait_seconds <= 86_400):
            raise InvalidInput("wait_seconds must be a number of seconds in (0, 86400]")

    def install(self, manager: Any) -> None:
        """Serve ``manager``'s (a stateless ``StreamableHTTPSessionManager``) handshake-era
        requests that carry a session here; the rest as before."""
        original: Handler = manager._handle_stateless_request

        async def handle(version: str | None, scope: Scope, receive: Receive, send: Send) -> None:
            session = scope.get(SESSION_SCOPE_KEY)
            if not isinstance(session, Session) or manager.json_response:
                # No session to keep an ask in, or no stream to send a request on.
                await original(version, scope, receive, send)
                return
            if scope["method"] == "POST":
                body, receive = await asgi.buffer_body(receive)
                if body is None:  # past the bound the manager itself keeps by default
                    await asgi.status(send, 413, "request body too large")
                    return
                answer = _answer_in(body)
                if answer is not None:
                    await self.take(manager, session, answer, scope, receive, send)
                    return
            await self.serve(manager, version, session, scope, receive, send)

        manager._handle_stateless_request = handle

    async def serve(
        self,
        manager: Any,
        version: str | None,
        session: Session,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        """The SDK's stateless request handling, with the relay between transport and
        dispatcher and ``can_send_request`` on."""
        held = Held(self.store)
        transport = StreamableHTTPServerTransport(
            mcp_session_id=None,
            is_json_response_enabled=False,
            event_store=None,
            security_settings=manager.security_settings,
        )

        async def run(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            try:
                await relayed(task_status)
            except Exception:  # never into the manager's task group: that would stop the server
                logger.exception("a session's request failed in the back channel")

        async def relayed(task_status: TaskStatus[None]) -> None:
            async with transport.connect() as (read_stream, write_stream):
                relay = Relay(self.store, self.wait_seconds, session, write_stream, held)
                dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                    relay.to_dispatcher,
                    relay.from_dispatcher_send,
                    inline_methods=frozenset({"initialize"}),
                    transport_builder=lambda _md: TransportContext(
                        kind="streamable-http", can_send_request=True
                    ),
                )
                connection = Connection.from_envelope(
                    version if version is not None else DEFAULT_NEGOTIATED_VERSION,
                    session.attributes.get("clientInfo"),
                    session.attributes.get("clientCapabilities"),
                )
                async with anyio.create_task_group() as tg:
                    await tg.start(relay.run, read_stream)
                    task_status.started()
                    try:
                        await serve_connection(
                            manager.app,
                            dispatcher,
                            connection=connection,
                            lifespan_state=manager._lifespan_state,
                        )
                    finally:
                        tg.cancel_scope.cancel()

        assert manager._task_group is not None
        # ``calls`` hands it the claim of the call this request runs: the relay keeps its lease.
        scope[LEASE_SCOPE_KEY] = held
        try:
            await manager._task_group.start(run)
            await transport.handle_request(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await transport.terminate()

    async def take(
        self,
        manager: Any,
        session: Session,
        answer: JSONRPCResponse | JSONRPCError,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        """A POST that answers an ask: checked as the SDK's transport checks a POST, written
        into the ask, then 202 (503 when the store failed: the client may send it again)."""
        request = Request(scope, receive)
        refused = await TransportSecurityMiddleware(manager.security_settings).validate_request(
            request, is_post=True
        )
        if refused is not None:
            await refused(scope, receive, send)
            return
        if check_accept_headers(request) != (True, True):
            await asgi.status(
                send,
                406,
                "Not Acceptable: Client must accept both application/json and text/event-stream",
            )
            return
        if isinstance(answer, JSONRPCResponse):
            reply: dict[str, Any] = {"result": answer.result}
        else:
            reply = {"error": answer.error.model_dump(mode="json", exclude_none=True)}
        ask_id = str(answer.id).removeprefix(ASK_ID_PREFIX)
        try:
            delivery = await self._write_answer(session.session_id, ask_id, reply)
        except Unavailable as exc:
            await asgi.status(send, 503, f"session store unavailable: {exc}")
            return
        if delivery is not asks.Delivery.TAKEN:
            logger.info(
                "session %s: answer to %s %s", session.session_id, answer.id, delivery.value
            )
        await asgi.status(send, 202, None)

    async def _write_answer(
        self, session_id: str, ask_id: str, reply: dict[str, Any]
    ) -> asks.Delivery:
        table = self.store.store.table
        try:
            text = codec.encode(reply)
        except InvalidInput as exc:  # not JSON the store writes (NaN ...): the tool learns why
            text = _failure(INTERNAL_ERROR, f"the client's answer cannot be kept: {exc}")
        try:
            return await self.store.run(asks.answer, table, session_id, ask_id, text)
        except ItemTooLarge as exc:
            text = _failure(INTERNAL_ERROR, f"the client's answer is too large to keep: {exc}")
            return await self.store.run(asks.answer, table, session_id, ask_id, text)
        except InvalidInput:
            return asks.Delivery.UNKNOWN  # not an id this layer made


def _answer_in(body: bytes) -> JSONRPCResponse | JSONRPCError | None:
    """The answer to an ask that ``body`` is, or None (anything else goes on to the SDK, which
    answers it as it would)."""
    try:
        raw = pydantic_core.from_json(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or "method" in raw:
        return None
    wire_id = raw.get("id")
    if not isinstance(wire_id, str) or not wire_id.startswith(ASK_ID_PREFIX):
        return None
    try:
        message = jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except ValidationError:
        return None
    return message if isinstance(message, JSONRPCResponse | JSONRPCError) else None


def _failure(code: int, message: str) -> str:
    return codec.encode({"error": {"code": code, "message": message}})
