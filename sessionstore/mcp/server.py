"""A store-backed MCP server that any instance can serve, and the demo tools.

Why the SDK's own sessions cannot be used: a legacy (2024-11-05 ... 2025-11-25) streamable-HTTP
session lives in one process's memory (``http_sessions`` says where), with no hook to supply an
external store (``EventStore`` only replays messages inside a live transport); the modern
protocol (2026-07-28) has no session at all. So the server runs the SDK *stateless*
(``stateless_http=True``: any instance serves any request of either protocol) and keeps the
application session in the table (``SessionStoreExtension``). ``requestState`` tokens
(multi-round-trip) are sealed with keys from configuration, so they verify on every instance too.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import logging
import operator
import os
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import uvicorn
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.request_state import RequestStateSecurity
from mcp_types import ToolAnnotations
from starlette.applications import Starlette

from .. import validate
from ..aio import AsyncSessionStore
from ..errors import InvalidInput
from ..store import SessionStore
from ..telemetry import VERSION
from . import http_sessions
from .extension import SessionStoreExtension
from .protocol import SessionHandle
from .sessions import DEFAULT_IDLE_SECONDS
from .tool_session import current_session

#: Comma-separated secrets (newest first) that seal ``requestState`` on every instance.
STATE_KEYS_ENV = "SESSIONSTORE_MCP_STATE_KEYS"
#: The SDK's rule for a ``RequestStateSecurity`` key.
MIN_STATE_KEY_BYTES = 32
_LOOPBACK = ("127.0.0.1", "::1", "localhost")

logger = logging.getLogger(__name__)


def request_state_security(
    keys: Sequence[str | bytes] | None = None, *, audience: str | None = None
) -> RequestStateSecurity:
    """Shared keys from the argument or ``SESSIONSTORE_MCP_STATE_KEYS``; without any, a
    process-local key -- fine for one instance, wrong behind a load balancer (said once, at
    INFO). A key under 32 bytes raises ``InvalidInput`` naming the rule."""
    source = "state_keys"
    if keys is None:
        source = STATE_KEYS_ENV
        keys = [k.strip() for k in os.environ.get(STATE_KEYS_ENV, "").split(",") if k.strip()]
    if not keys:
        logger.info(
            "requestState is sealed with a process-local key: one instance only (set %s, "
            "comma-separated keys of at least %d bytes, to run more)",
            STATE_KEYS_ENV,
            MIN_STATE_KEY_BYTES,
        )
        return RequestStateSecurity.ephemeral(audience=audience)
    for position, key in enumerate(keys, 1):
        size = len(key.encode() if isinstance(key, str) else key)
        if size < MIN_STATE_KEY_BYTES:
            raise InvalidInput(
                f"{source}: key {position} has {size} bytes; each requestState key needs at "
                f"least {MIN_STATE_KEY_BYTES} (the MCP SDK's rule)"
            )
    return RequestStateSecurity(keys=list(keys), audience=audience)


def create_server(
    store: AsyncSessionStore | SessionStore | None,
    *,
    name: str = "sessionstore-demo",
    state_keys: Sequence[str | bytes] | None = None,
    token_verifier: TokenVerifier | None = None,
    auth: AuthSettings | None = None,
    lease_seconds: int = 300,
    default_ttl_seconds: int = 3600,
    idle_seconds: int | None = DEFAULT_IDLE_SECONDS,
    demo_tools: bool = True,
    log_level: str = "WARNING",
    extension: SessionStoreExtension | None = None,
) -> MCPServer:
    """An ``MCPServer`` with the store's extension (``store=None``: the bare server, same tools,
    no sessions -- the baseline for measuring what the store costs). Sessions expire after
    ``default_ttl_seconds`` (unless they ask for another cap) and after ``idle_seconds``
    without use (None: never idle). ``extension``: one built with other options (its store is
    used)."""
    if isinstance(store, SessionStore):
        store = AsyncSessionStore(store)
    if store is not None and not isinstance(store, AsyncSessionStore):
        raise InvalidInput("store must be a SessionStore, an AsyncSessionStore or None")
    if extension is None and store is not None:
        extension = SessionStoreExtension(
            store,
            lease_seconds=lease_seconds,
            default_ttl_seconds=default_ttl_seconds,
            idle_seconds=idle_seconds,
        )
    server: MCPServer = MCPServer(
        name,
        version=VERSION,  # serverInfo.version: what a client shows and an operator greps for
        instructions=_instructions(extension),
        extensions=[extension] if extension is not None else [],
        request_state_security=request_state_security(state_keys),
        token_verifier=token_verifier,
        auth=auth,
        log_level=log_level,  # type: ignore[arg-type]
    )
    if extension is not None:
        extension.attach(server)
    if demo_tools:
        add_demo_tools(server, sessions=extension is not None)
    return server


def _instructions(extension: SessionStoreExtension | None) -> str | None:
    if extension is None:
        return None
    handle = extension.handle_argument
    ways = [
        "Tools that take a '" + handle + "' argument work in a session. A client that keeps "
        "an Mcp-Session-Id has one already and may leave the argument out."
    ]
    if extension.open_tool:
        ways.append(
            f"Otherwise call the tool '{extension.open_tool}' once and pass the session_id it "
            f"returns as '{handle}' to each such tool"
            + (f"; end it with '{extension.close_tool}'." if extension.close_tool else ".")
        )
    if extension.idempotency_argument:
        ways.append(
            f"Where a tool takes '{extension.idempotency_argument}', send a fresh key per call "
            "and the same key when retrying it: the retry returns the first result."
        )
    return " ".join(ways)


def add_demo_tools(server: MCPServer, *, sessions: bool = True) -> None:
    """``calculate`` (pure), and with sessions ``note`` / ``notes`` (the session's context)."""
    server.add_tool(calculate)
    if sessions:
        server.add_tool(note)
        # Read-only by the server's own word: served without a claim (one request less).
        server.add_tool(notes, annotations=ToolAnnotations(read_only_hint=True))


def calculate(expression: str) -> float | int:
    """Evaluate an arithmetic expression: numbers, + - * / // % ** and parentheses."""
    if len(expression) > 200:
        raise ToolError("expression longer than 200 characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {expression!r}") from exc
    return _evaluate(tree.body)


_OPERATORS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float | int:
    # A whitelist walk, never eval(): the expression comes from the client.
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ToolError("booleans are not numbers here")
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ToolError("exponent too large")
        try:
            return _OPERATORS[type(node.op)](left, right)  # type: ignore[no-any-return]
        except ZeroDivisionError as exc:
            raise ToolError("division by zero") from exc
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))  # type: ignore[no-any-return]
    raise ToolError(f"unsupported element: {type(node).__name__}")


async def note(text: str, session_id: SessionHandle = None) -> dict[str, Any]:
    """Append a note to this session's context; returns the note's position and the version."""
    if not text or len(text) > 10_000:
        raise ToolError("a note is 1-10,000 characters")
    session = await current_session().append({"role": "note", "text": text})
    return {"position": session.message_count, "version": session.version}


async def notes(session_id: SessionHandle = None) -> list[str]:
    """Every note of this session, oldest first."""
    context = await current_session().context()
    return [m["text"] for m in context if isinstance(m, dict) and m.get("role") == "note"]


def create_app(
    server: MCPServer,
    *,
    host: str = "127.0.0.1",
    adopt_session_ids: bool = False,
    answer_wait_seconds: float | None = None,
) -> Starlette:
    """The streamable-HTTP app, stateless: any instance serves any request, either protocol.

    With the store's extension, legacy clients' ``Mcp-Session-Id`` sessions live in the table
    (``http_sessions.LegacySessions``); ``adopt_session_ids``: create a session for an id the
    table does not know (a platform in front mints them). A tool in such a session may send
    the client a request (sampling, elicitation) and waits at most ``answer_wait_seconds`` for
    the answer, which may reach any instance (``back_channel``; default 240 s, or 80 % of the
    extension's lease if that is shorter)."""
    if answer_wait_seconds is not None:  # and under the extension's lease: checked at install
        validate.seconds_in(
            "answer_wait_seconds", answer_wait_seconds, 0, validate.MAX_TTL_SECONDS, above=True
        )
    app = server.streamable_http_app(stateless_http=True, host=host)
    extension = SessionStoreExtension.attached_to(server)
    if extension is not None:
        http_sessions.install(
            server.session_manager,
            extension,
            adopt_ids=adopt_session_ids,
            answer_wait_seconds=answer_wait_seconds,
        )
    # addFilter skips a filter already there, so creating many apps adds it once.
    logging.getLogger("mcp.server.streamable_http").addFilter(_drop_sessionless_termination)
    return app


def _drop_sessionless_termination(record: logging.LogRecord) -> bool:
    # A stateless transport ends after every request and logs "Terminating session: None":
    # noise that reads like a session being lost. Our layer logs sessions in the store's terms.
    return record.getMessage() != "Terminating session: None"


class _Embedded(uvicorn.Server):
    """uvicorn inside a process it does not own (a kernel, a test run): the process's signals
    stay its owner's. uvicorn's own server takes SIGINT and SIGTERM in the main thread while it
    serves and puts back, when it stops, the handlers it found -- so of two servers stopped in
    the order they started, the last leaves the process the first one's handler, a stopped
    server's; the SSE library's shutdown watcher looks that handler up in every thread, takes
    the stopped server for a shutdown, and ends every later stream before its answer."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class RunningServer:
    """An ASGI app served by uvicorn in this event loop, on a socket bound to loopback (what
    the tests and notebooks use: ``MCPServer.run()`` cannot start inside a running loop). The
    process's signal handlers are left as they are: Ctrl-C interrupts the kernel, not a server.

    ``async with RunningServer(app) as running: running.url`` -- port 0 picks a free one.
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0) -> None:
        if host not in _LOOPBACK:
            raise InvalidInput("RunningServer listens on loopback only")
        self._app = app
        self._host = host
        self._port = port
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    async def start(self, timeout: float = 10) -> RunningServer:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on a connection whose socket says
        # so. Without it an answer's body waited for the client's delayed ACK of its headers
        # (about 40 ms a call on a kept-alive connection).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self._app, log_level="warning", lifespan="on")
        self._server = _Embedded(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        async with asyncio.timeout(timeout):
            while not self._server.started:  # bounded by the timeout
                if self._task.done():
                    self._task.result()  # start-up failed: raise its error
                await asyncio.sleep(0.01)
        return self

    async def stop(self, timeout: float = 10) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            async with asyncio.timeout(timeout):
                await self._task
        except TimeoutError:
            self._server.force_exit = True
            self._task.cancel()
        self._server = None
        self._task = None

    async def __aenter__(self) -> RunningServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
