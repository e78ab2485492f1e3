"""The relay between one session request's transport and the SDK's dispatcher.

Layer: MCP, over the core's ``asks``; ``back_channel`` puts it in every session request it
serves. Why: the dispatcher sends a tool's request to the client and waits for a response on its
read stream, in memory. The relay gives the request an ask id and opens the ask in the table
(``asks.ask``), polls the table for the answer (``asks.poll``) and hands it to the dispatcher as
if the client had sent it here; then it removes the answer it read (``asks.settle``). Polls come
after ``POLLS`` and then once a second, until a bounded wait is over or the session ends. While
the tool waits, its claim's lease is kept (``lease_keeper.Held.keep``: when an ask is opened, and
after each poll that found no answer).

Nothing here may fail the server: a stream closed under the relay (the client gone, the
transport torn down) ends the relay, and the dispatcher sees the end as its own.
"""

from __future__ import annotations

import contextvars
import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared._context_streams import ContextReceiveStream
from mcp.shared._stream_protocols import WriteStream
from mcp.shared.message import SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    REQUEST_TIMEOUT,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

from .. import asks
from ..aio import AsyncSessionStore
from ..errors import SessionStoreError, Unavailable
from ..models import Session
from .lease_keeper import Held

#: The JSON-RPC id of a request this layer sent begins so: how an answer is recognised.
ASK_ID_PREFIX: Final = "ask-"
#: Seconds between polls for an answer: quick at first (a client answers a sampling request
#: in milliseconds), then once a second for as long as the wait lasts.
POLLS: Final = (0.05, 0.1, 0.2, 0.4, 0.8)
_STEADY_POLL: Final = 1.0
#: How long after the ask's deadline the last poll is (instances' clocks differ a little).
_MARGIN: Final = 1.0

logger = logging.getLogger(__name__)

_Envelope = tuple[contextvars.Context, SessionMessage | Exception]


def _schedule(wait_seconds: float) -> list[float]:
    """The pauses between polls: a bounded count, the last ``_MARGIN`` past the ask's deadline,
    so an answer taken just before it is still read."""
    pauses: list[float] = []
    left = wait_seconds + _MARGIN
    for pause in (*POLLS, *[_STEADY_POLL] * math.ceil(left)):
        if left <= 0:
            break
        pauses.append(min(pause, left))
        left -= pause
    return pauses


@dataclass
class Relay:
    """Between one request's transport and its dispatcher: outgoing requests become asks, and
    their answers come back from the table as if the client had sent them here."""

    store: AsyncSessionStore
    wait_seconds: float
    session: Session
    to_transport: WriteStream[SessionMessage]
    #: The claim of the call this request runs, whose lease is kept while it waits.
    lease: Held
    #: The asks this request waits for, by the dispatcher's id: their ask id and their poll.
    waiting: dict[RequestId, tuple[str, anyio.CancelScope]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The transport's streams carry each message's context (the request's, with its
        # principal) for the dispatcher to run the handler in: the relay hands it on as it is.
        send, receive = anyio.create_memory_object_stream[_Envelope](math.inf)
        self._to_dispatcher_send: MemoryObjectSendStream[_Envelope] = send
        self.to_dispatcher = ContextReceiveStream[SessionMessage | Exception](receive)
        out_send, out_receive = anyio.create_memory_object_stream[SessionMessage](0)
        self.from_dispatcher_send: MemoryObjectSendStream[SessionMessage] = out_send
        self._from_dispatcher: MemoryObjectReceiveStream[SessionMessage] = out_receive

    async def run(
        self,
        from_transport: ContextReceiveStream[SessionMessage | Exception],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        async with anyio.create_task_group() as waits:
            waits.start_soon(self._outbound, waits)
            task_status.started()
            async with from_transport:
                while True:
                    try:
                        message = await from_transport.receive()
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        break  # closed under us at the transport's teardown: the same end
                    context = from_transport.last_context or contextvars.copy_context()
                    if not await self._to_dispatcher((context, message)):
                        break
            # The transport is done: nobody is left to answer.
            waits.cancel_scope.cancel()
        self._to_dispatcher_send.close()

    async def _to_dispatcher(self, envelope: _Envelope) -> bool:
        """Hand a message to the dispatcher; False once it has stopped reading."""
        try:
            await self._to_dispatcher_send.send(envelope)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        return True

    async def _outbound(self, waits: TaskGroup) -> None:
        async with self._from_dispatcher:
            async for message in self._from_dispatcher:
                inner = message.message
                outgoing: SessionMessage | None = message
                if isinstance(inner, JSONRPCRequest):
                    outgoing = await self._ask(message, inner, waits)
                elif isinstance(inner, JSONRPCNotification) and inner.method == (
                    "notifications/cancelled"
                ):
                    outgoing = self._cancelled(message, inner)
                if outgoing is None:
                    continue
                try:
                    await self.to_transport.send(outgoing)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    # The client went away: the dispatcher's next write fails as its own does.
                    return

    async def _ask(
        self, message: SessionMessage, request: JSONRPCRequest, waits: TaskGroup
    ) -> SessionMessage | None:
        store = self.store
        table = store.store.table
        wait_ms = int(self.wait_seconds * 1000)
        sid = self.session.session_id
        await self.lease.keep()  # the tool waits from now on
        try:
            ask_id, deadline = await store.run(
                asks.ask, table, sid, table.token(), request.method, wait_ms
            )
        except SessionStoreError as exc:
            await self._answer(request.id, ErrorData(code=INTERNAL_ERROR, message=str(exc)))
            return None
        scope = anyio.CancelScope()
        wire_id = f"{ASK_ID_PREFIX}{ask_id}"
        self.waiting[request.id] = (wire_id, scope)
        waits.start_soon(self._wait, request.id, ask_id, deadline, scope)
        return SessionMessage(request.model_copy(update={"id": wire_id}), message.metadata)

    def _cancelled(self, message: SessionMessage, note: JSONRPCNotification) -> SessionMessage:
        # The SDK cancels by its own id; the client knows the ask id. Stop polling, too.
        params = dict(note.params or {})
        request_id = params.get("requestId")
        waiting = None if request_id is None else self.waiting.pop(request_id, None)
        if waiting is None:
            return message
        params["requestId"], scope = waiting
        scope.cancel()
        return SessionMessage(note.model_copy(update={"params": params}), message.metadata)

    async def _wait(
        self, request_id: RequestId, ask_id: str, deadline_ms: int, scope: anyio.CancelScope
    ) -> None:
        with scope:
            await self._poll(request_id, ask_id, deadline_ms)
        self.waiting.pop(request_id, None)

    async def _poll(self, request_id: RequestId, ask_id: str, deadline_ms: int) -> None:
        store = self.store
        table = store.store.table
        session_id, owner = self.session.session_id, self.session.owner
        for pause in _schedule(self.wait_seconds):
            await anyio.sleep(pause)
            try:
                text = await store.run(asks.poll, table, session_id, ask_id, owner)
            except Unavailable as exc:  # the store, not the session: poll again
                logger.warning("session %s: poll for an answer failed: %s", session_id, exc)
                continue
            except SessionStoreError as exc:
                why = f"the session ended while the client was being asked: {exc}"
                await self._answer(request_id, ErrorData(code=CONNECTION_CLOSED, message=why))
                return
            if text is not None:
                await self._answer(request_id, _reply(text))
                try:
                    await store.run(asks.settle, table, session_id, ask_id)
                except SessionStoreError as exc:  # only bytes left for TTL: say so, go on
                    logger.warning("session %s: answer not removed: %s", session_id, exc)
                return
            if table.now_ms() >= deadline_ms + _MARGIN * 1000:
                break
            await self.lease.keep()
        why = f"no answer from the client within {self.wait_seconds:g} s"
        await self._answer(request_id, ErrorData(code=REQUEST_TIMEOUT, message=why))

    async def _answer(self, request_id: RequestId, reply: dict[str, Any] | ErrorData) -> None:
        if isinstance(reply, ErrorData):
            message: JSONRPCResponse | JSONRPCError = JSONRPCError(
                jsonrpc="2.0", id=request_id, error=reply
            )
        else:
            message = JSONRPCResponse(jsonrpc="2.0", id=request_id, result=reply)
        await self._to_dispatcher((contextvars.copy_context(), SessionMessage(message)))


def _reply(text: str) -> dict[str, Any] | ErrorData:
    reply = json.loads(text)
    if isinstance(reply, dict) and isinstance(reply.get("result"), dict):
        return dict(reply["result"])
    error = reply.get("error") if isinstance(reply, dict) else None
    try:
        return ErrorData.model_validate(error)
    except ValueError:
        return ErrorData(code=INTERNAL_ERROR, message=f"the client's answer is malformed: {text}")
