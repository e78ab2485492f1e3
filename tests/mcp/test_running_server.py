"""``RunningServer``: the uvicorn the tests and notebooks serve MCP apps with, on loopback."""

from __future__ import annotations

import asyncio
import socket

from sessionstore.mcp import RunningServer, create_app, create_server


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
