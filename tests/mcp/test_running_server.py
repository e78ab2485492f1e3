"""``RunningServer``: the uvicorn the tests and notebooks serve MCP apps with, on loopback."""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from typing import Any

from mcp import Client

from sessionstore.mcp import RunningServer, create_app, create_server

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _app() -> Any:
    return create_app(create_server(None))  # the bare server: ``calculate`` only


def _handlers() -> dict[signal.Signals, Any]:
    return {sig: signal.getsignal(sig) for sig in SIGNALS}


async def _two_stopped_in_the_order_they_started() -> tuple[dict[signal.Signals, Any], ...]:
    """Two servers in this (the main) thread, the first stopped first, as a test that restarts
    an instance does; the signal handlers before the first started, while both served, and
    after both stopped (inside the loop: ``asyncio.run`` has its own SIGINT handler)."""
    before = _handlers()
    first = await RunningServer(_app()).start()
    second = await RunningServer(_app()).start()
    during = _handlers()
    await first.stop()
    await second.stop()
    return before, during, _handlers()


def test_every_connection_it_accepts_sends_without_delay() -> None:
    """TCP_NODELAY on each accepted connection: an answer is written as headers then body, and
    with Nagle's algorithm the body waited for the client's delayed ACK of the headers."""

    async def accepted_nodelay() -> list[int]:
        async with RunningServer(create_app(create_server(None, demo_tools=False))) as running:
            _reader, writer = await asyncio.open_connection("127.0.0.1", running.port)
            try:
                async with asyncio.timeout(10):
                    while not (connections := running._server.server_state.connections):  # type: ignore[union-attr]
                        await asyncio.sleep(0.01)  # bounded by the timeout
                return [
                    conn.transport.get_extra_info("socket").getsockopt(
                        socket.IPPROTO_TCP, socket.TCP_NODELAY
                    )
                    for conn in connections
                ]
            finally:
                writer.close()
                await writer.wait_closed()

    assert asyncio.run(accepted_nodelay()) == [1]


def test_servers_leave_the_process_signal_handlers_as_they_found_them() -> None:
    """A server inside a kernel or a test run does not take SIGINT and SIGTERM: Ctrl-C is the
    kernel's, and no handler of a stopped server is left behind."""
    outside = _handlers()
    before, during, after = asyncio.run(_two_stopped_in_the_order_they_started())
    assert during == after == before
    assert _handlers() == outside


def test_a_stream_after_servers_stopped_out_of_order_still_gets_its_answer() -> None:
    """The SSE library's shutdown watcher reads the process's SIGTERM handler in every thread:
    a stopped server's handler left there ended every later stream before its answer ("SSE
    stream ended without a response"), here to a handshake-era client on a server of its own
    thread, as the module-scoped servers of the hostile-arguments tests run."""
    asyncio.run(_two_stopped_in_the_order_they_started())

    async def initialize_and_call() -> Any:
        async with (
            RunningServer(_app()) as running,
            Client(running.url, mode="legacy") as client,
        ):
            return (await client.call_tool("calculate", {"expression": "6*7"})).structured_content

    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(_outcome(initialize_and_call)))
    thread.start()
    thread.join(60)
    assert not thread.is_alive()
    assert answers == [{"result": 42}]


def _outcome(main: Any) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(30):
            return await main()

    try:
        return asyncio.run(bounded())
    except Exception as exc:  # the thread's error, for the assertion in the test's thread
        return exc
