"""A round-robin reverse proxy: the load balancer in front of several MCP server instances.

Tests and notebooks need one URL whose requests land on different instances in turn -- that is
what proves a session survives the hop between them -- without a real load balancer. Serve it
like any app, on loopback::

    proxy = RoundRobinProxy([a_base_url, b_base_url])
    async with RunningServer(proxy) as running:
        async with mcp.Client(running.url, mode="legacy") as client: ...
    proxy.counts  # requests routed to each backend

Responses are streamed chunk by chunk (streamable HTTP answers with server-sent events, and a GET
may stay open). A backend that cannot be reached answers 502 (504 if it does not answer in time),
as a load balancer's would; nothing is retried on another backend (retrying a POST is not safe in
general, and is left to a later, explicit feature). The client is ``httpx2``, which ``mcp``
already depends on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import anyio
import httpx2
from starlette.types import Receive, Scope, Send

from ..errors import InvalidInput

__all__ = [
    "DEFAULT_TIMEOUT",
    "HOP_BY_HOP",
    "RoundRobinProxy",
]

#: Connection-scoped headers (RFC 9110 7.6.1) that a proxy must not forward.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# httpx2 sets host and content-length for the backend itself; uvicorn adds its own date and server.
_NOT_FORWARDED = {"host", "content-length"}
_NOT_RETURNED = {"date", "server"}
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

#: Bounded everywhere. ``read`` is the longest silence on an open response (an SSE stream
#: included), like a load balancer's idle timeout (60 s by default on an AWS ALB).
DEFAULT_TIMEOUT = httpx2.Timeout(connect=5, read=60, write=10, pool=5)


class RoundRobinProxy:
    """An ASGI app sending each HTTP request to the next backend in turn.

    ``backends`` are base URLs on loopback (``http://127.0.0.1:PORT``); the request's path and
    query are appended. ``counts`` (per backend) and ``log`` (``(method, backend)`` in order)
    record every routed request, refused ones included.
    """

    def __init__(
        self, backends: Sequence[str], *, timeout: httpx2.Timeout = DEFAULT_TIMEOUT
    ) -> None:
        self._backends: list[str] = []
        self._turn = 0
        self._timeout = timeout
        self._client: httpx2.AsyncClient | None = None
        self.counts: Counter[str] = Counter()
        self.log: list[tuple[str, str]] = []
        self.set_backends(backends)

    @property
    def backends(self) -> list[str]:
        return list(self._backends)

    def set_backends(self, backends: Sequence[str]) -> None:
        """Replace the backends (an instance restarted on a new port); the turn carries on."""
        checked = []
        for backend in backends:
            url = httpx2.URL(backend)
            if url.scheme not in ("http", "https") or url.host not in _LOOPBACK:
                raise InvalidInput(f"backends are http(s) URLs on loopback, not {backend!r}")
            checked.append(backend.rstrip("/"))
        self._backends = checked

    def _http(self) -> httpx2.AsyncClient:
        # Made on first use, in the serving event loop; made again if served after aclose().
        if self._client is None:
            self._client = httpx2.AsyncClient(
                timeout=self._timeout,
                # The backends are on loopback: HTTP(S)_PROXY from the environment must not
                # divert them.
                trust_env=False,
                follow_redirects=False,
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client (done on lifespan shutdown too)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._proxy(scope, receive, send)
        # Anything else (websocket) is refused by returning without accepting it.

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _proxy(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        method: str = scope["method"]
        if not self._backends:
            await _answer(send, 503, "no backend to send the request to")
            return
        backend = self._backends[self._turn % len(self._backends)]
        self._turn += 1
        self.counts[backend] += 1
        self.log.append((method, backend))

        path: bytes = scope.get("raw_path") or scope["path"].encode()
        query: bytes = scope.get("query_string", b"")
        url = backend + path.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
        client = self._http()
        request = client.build_request(
            method,
            url,
            headers=_forwarded(scope["headers"], _NOT_FORWARDED),
            content=bytes(body),
        )
        async with anyio.create_task_group() as tasks:

            async def on_disconnect() -> None:
                # uvicorn drops sends once the client has gone, so without this the backend
                # would be waited on, and an open stream read, until it ends or times out.
                while (await receive())["type"] != "http.disconnect":
                    pass
                tasks.cancel_scope.cancel()

            tasks.start_soon(on_disconnect)
            await _relay(client, request, backend, send)
            tasks.cancel_scope.cancel()


async def _relay(
    client: httpx2.AsyncClient, request: httpx2.Request, backend: str, send: Send
) -> None:
    try:
        response = await client.send(request, stream=True)
    except httpx2.TimeoutException:
        await _answer(send, 504, f"gateway timeout: no answer from {backend}")
        return
    except httpx2.TransportError as exc:
        await _answer(send, 502, f"bad gateway: {backend}: {type(exc).__name__}")
        return
    try:
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": _forwarded(response.headers.raw, _NOT_RETURNED),
            }
        )
        # Raw bytes, each chunk as it arrives: no buffering, no decoding (content-encoding is
        # passed on). A backend failing mid-stream raises here and uvicorn drops the
        # connection, as a load balancer resets it.
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        await response.aclose()


def _forwarded(
    headers: Iterable[tuple[bytes, bytes]], dropped: Iterable[str]
) -> list[tuple[bytes, bytes]]:
    pairs = [(name.lower(), value) for name, value in headers]
    skip = set(HOP_BY_HOP) | set(dropped)
    for name, value in pairs:
        if name == b"connection":  # it names further connection-scoped headers
            skip.update(token.strip().lower() for token in value.decode("latin-1").split(","))
    return [(name, value) for name, value in pairs if name.decode("latin-1") not in skip]


async def _answer(send: Send, status: int, text: str) -> None:
    body = f"{status} {text}\n".encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
