"""sessionstore.testing.proxy over real HTTP on loopback: tiny Starlette backends and real MCP
servers, each served by ``RunningServer``, behind the round-robin proxy."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route

from sessionstore.errors import InvalidInput
from sessionstore.mcp import RunningServer
from sessionstore.testing.proxy import RoundRobinProxy

TIMEOUT = 30


def _run(main: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(TIMEOUT):
            return await main()

    return asyncio.run(bounded())


def _base(running: RunningServer) -> str:
    return f"http://127.0.0.1:{running.port}"


def _http() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(timeout=10, trust_env=False)


class Streams:
    """What the SSE route and the test tell each other."""

    def __init__(self) -> None:
        self.first_received = asyncio.Event()
        self.second_sent = asyncio.Event()
        self.endless_closed = asyncio.Event()


def backend(name: str, streams: Streams | None = None) -> Starlette:
    async def echo(request: Request) -> PlainTextResponse:
        body = (await request.body()).decode()
        return PlainTextResponse(
            f"{name} {request.method} {request.url.path}?{request.url.query} "
            f"x-test={request.headers.get('x-test')} "
            f"x-private={request.headers.get('x-private')} "
            f"host={request.headers['host']} body={body}",
            headers={"x-backend": name},
        )

    async def events(_request: Request) -> StreamingResponse:
        assert streams is not None

        async def two_events() -> AsyncIterator[bytes]:
            yield b"data: one\n\n"
            # Held until the client has the first: a buffering proxy never gets here.
            await streams.first_received.wait()
            streams.second_sent.set()
            yield b"data: two\n\n"

        return StreamingResponse(two_events(), media_type="text/event-stream")

    async def endless(_request: Request) -> StreamingResponse:
        assert streams is not None

        async def one_event_then_nothing() -> AsyncIterator[bytes]:
            try:
                yield b"data: hello\n\n"
                await asyncio.Event().wait()  # like a GET stream with nothing to say
            finally:
                streams.endless_closed.set()

        return StreamingResponse(one_event_then_nothing(), media_type="text/event-stream")

    async def broken(_request: Request) -> StreamingResponse:
        async def one_event_then_crash() -> AsyncIterator[bytes]:
            yield b"data: partial\n\n"
            raise RuntimeError("the instance died mid-stream")

        return StreamingResponse(one_event_then_crash(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/echo/{rest:path}", echo, methods=["GET", "POST", "PUT", "DELETE"]),
            Route("/events", events),
            Route("/endless", endless),
            Route("/broken", broken),
        ]
    )


def test_requests_alternate_between_backends_with_method_path_query_headers_and_body() -> None:
    async def main() -> None:
        async with (
            RunningServer(backend("a")) as a,
            RunningServer(backend("b")) as b,
        ):
            proxy = RoundRobinProxy([_base(a), _base(b)])
            async with RunningServer(proxy) as front, _http() as http:
                origin = _base(front)
                bodies = []
                for i in range(4):
                    response = await http.post(
                        f"{origin}/echo/x/{i}?q={i}&r=s",
                        content=f"payload {i}",
                        headers={"x-test": f"t{i}", "connection": "x-private", "x-private": "p"},
                    )
                    assert response.status_code == 200
                    bodies.append(response.text)
                get = await http.get(f"{origin}/echo/last")
        assert bodies == [
            f"{name} POST /echo/x/{i}?q={i}&r=s x-test=t{i} x-private=None "
            f"host=127.0.0.1:{port} body=payload {i}"
            for i, (name, port) in enumerate([("a", a.port), ("b", b.port)] * 2)
        ]
        assert get.text.startswith("a GET /echo/last? ") and get.headers["x-backend"] == "a"
        assert proxy.counts == Counter({_base(a): 3, _base(b): 2})
        assert proxy.log == [("POST", _base(a)), ("POST", _base(b))] * 2 + [("GET", _base(a))]

    _run(main)


def test_an_event_stream_is_relayed_event_by_event() -> None:
    streams = Streams()

    async def main() -> list[str]:
        async with RunningServer(backend("a", streams)) as a:
            proxy = RoundRobinProxy([_base(a)])
            async with RunningServer(proxy) as front, _http() as http:
                received: list[str] = []
                async with http.stream("GET", f"{_base(front)}/events") as response:
                    assert response.headers["content-type"].startswith("text/event-stream")
                    async for line in response.aiter_lines():
                        if not line:
                            continue
                        if not received:
                            # The backend sends the second event only after this.
                            assert not streams.second_sent.is_set()
                            streams.first_received.set()
                        received.append(line)
                return received

    assert _run(main) == ["data: one", "data: two"]
    assert streams.second_sent.is_set()


def test_a_client_leaving_an_open_stream_closes_it_at_the_backend() -> None:
    streams = Streams()

    async def main() -> None:
        async with RunningServer(backend("a", streams)) as a:
            proxy = RoundRobinProxy([_base(a)])
            async with RunningServer(proxy) as front:
                async with _http() as http, http.stream("GET", f"{_base(front)}/endless") as r:
                    async for line in r.aiter_lines():
                        assert line == "data: hello"
                        break
                # Well before the proxy's 60 s read timeout would end it.
                await streams.endless_closed.wait()

    _run(main)


def test_a_backend_dying_mid_stream_breaks_the_response_instead_of_ending_it() -> None:
    async def main() -> list[str]:
        async with RunningServer(backend("a")) as a:
            proxy = RoundRobinProxy([_base(a)])
            async with RunningServer(proxy) as front, _http() as http:
                received: list[str] = []
                with pytest.raises(httpx2.RemoteProtocolError):
                    async with http.stream("GET", f"{_base(front)}/broken") as response:
                        async for line in response.aiter_lines():
                            received.append(line)
                return received

    assert _run(main) == ["data: partial", ""]


def test_set_backends_switches_to_a_restarted_instance() -> None:
    async def main() -> None:
        async with RunningServer(backend("b")) as b:
            a = await RunningServer(backend("a")).start()
            proxy = RoundRobinProxy([_base(a)])
            async with RunningServer(proxy) as front, _http() as http:
                first = await http.get(f"{_base(front)}/echo/1")
                await a.stop()
                restarted = await RunningServer(backend("a2")).start()
                try:
                    proxy.set_backends([_base(restarted), _base(b)])
                    after = [(await http.get(f"{_base(front)}/echo/{i}")).text for i in range(3)]
                finally:
                    await restarted.stop()
        assert first.text.startswith("a GET")
        assert [text.split()[0] for text in after] == ["b", "a2", "b"]
        assert proxy.backends == [_base(restarted), _base(b)]
        assert proxy.counts[_base(a)] == 1 and proxy.counts[_base(b)] == 2

    _run(main)


def test_a_dead_backend_answers_502_and_is_not_retried_elsewhere() -> None:
    async def main() -> None:
        # A port bound but not listening refuses connections, and stays ours meanwhile.
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{holder.getsockname()[1]}"
            async with RunningServer(backend("live")) as live:
                proxy = RoundRobinProxy([dead, _base(live)])
                async with RunningServer(proxy) as front, _http() as http:
                    refused = await http.post(f"{_base(front)}/echo/x", content="once")
                    served = await http.post(f"{_base(front)}/echo/x", content="twice")
        assert refused.status_code == 502
        assert refused.headers["content-type"].startswith("text/plain")
        assert refused.text.startswith("502 bad gateway") and dead in refused.text
        assert served.status_code == 200 and served.text.startswith("live POST")
        assert proxy.log == [("POST", dead), ("POST", _base(live))]

    _run(main)


def test_no_backends_is_503_and_backends_must_be_on_loopback() -> None:
    async def main() -> int:
        proxy = RoundRobinProxy([])
        async with RunningServer(proxy) as front, _http() as http:
            return (await http.get(f"{_base(front)}/anything")).status_code

    assert _run(main) == 503
    with pytest.raises(InvalidInput):
        RoundRobinProxy(["http://10.0.0.1:8000"])


def test_the_proxy_serves_again_after_its_lifespan_closed_its_client() -> None:
    async def main() -> list[str]:
        async with RunningServer(backend("a")) as a:
            proxy = RoundRobinProxy([_base(a)])
            texts = []
            for _ in range(2):
                async with RunningServer(proxy) as front, _http() as http:
                    texts.append((await http.get(f"{_base(front)}/echo/x")).text)
            await proxy.aclose()  # idempotent
            return texts

    assert [text.split()[0] for text in _run(main)] == ["a", "a"]


def mcp_instance(name: str, executions: Counter[str]) -> Starlette:
    server = MCPServer(name)

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        executions[name] += 1
        return a + b

    return server.streamable_http_app(stateless_http=True)


def test_the_mcp_client_lists_and_calls_tools_through_the_proxy() -> None:
    executions: Counter[str] = Counter()

    async def main() -> tuple[RoundRobinProxy, list[str], list[int]]:
        async with (
            RunningServer(mcp_instance("one", executions)) as one,
            RunningServer(mcp_instance("two", executions)) as two,
        ):
            proxy = RoundRobinProxy([_base(one), _base(two)])
            async with RunningServer(proxy) as front:
                async with Client(front.url, mode="legacy") as client:
                    tools = await client.list_tools()
                    sums = []
                    for i in range(4):
                        result = await client.call_tool("add", {"a": i, "b": 10})
                        assert not result.is_error
                        sums.append(int(result.content[0].text))  # type: ignore[union-attr]
                return proxy, [tool.name for tool in tools.tools], sums

    proxy, names, sums = _run(main)
    assert names == ["add"]
    assert sums == [10, 11, 12, 13]
    # Four consecutive calls alternate, whatever went before them.
    assert executions == Counter({"one": 2, "two": 2}), proxy.log
    assert len(proxy.counts) == 2 and min(proxy.counts.values()) >= 3, proxy.log
