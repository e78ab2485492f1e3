"""A FastMCP server written the FastMCP way, for the race, the tests, the benchmark and notebook 09.

Layer: an example application of ``sessionstore.fastmcp``. Why it exists: to show that tools
written against FastMCP's own session API -- ``SessionProvider``, ``session_id: SessionId``,
``await get_session(session_id)``, ``session: UserSession`` -- run unchanged whichever store holds
the state; only ``session_state_store`` differs between the stock server and the store-backed one.
"""

from __future__ import annotations

from typing import Any

from fastmcp import FastMCP
from fastmcp.server.auth import AuthProvider
from fastmcp.server.dependencies import get_session
from fastmcp.server.sessions import SessionId, SessionProvider, UserSession
from key_value.aio.protocols.key_value import AsyncKeyValue

__all__ = ["create_server"]


def create_server(
    session_state_store: AsyncKeyValue | None = None, *, auth: AuthProvider | None = None
) -> FastMCP:
    """The demo server; ``session_state_store`` as FastMCP takes it (None: FastMCP's default)."""
    mcp = FastMCP("sessionstore-fastmcp-demo", session_state_store=session_state_store, auth=auth)
    mcp.add_provider(SessionProvider())

    @mcp.tool
    async def remember(session_id: SessionId, key: str, value: Any) -> str:
        """Keep ``value`` under ``key`` in the session."""
        session = await get_session(session_id)
        await session.set(key, value)
        return "ok"

    @mcp.tool
    async def recall(session_id: SessionId, key: str) -> dict[str, Any]:
        """``{"value": the value under key, or null}``."""
        session = await get_session(session_id)
        return {"value": await session.get(key)}

    @mcp.tool
    async def recall_many(session_id: SessionId, keys: list[str]) -> dict[str, Any]:
        """The values under ``keys`` (null for a missing one)."""
        session = await get_session(session_id)
        return {key: await session.get(key) for key in keys}

    @mcp.tool
    async def forget(session_id: SessionId, key: str) -> str:
        """Remove ``key`` from the session."""
        session = await get_session(session_id)
        await session.delete(key)
        return "ok"

    @mcp.tool
    async def forget_all(session_id: SessionId) -> str:
        """Empty the session; it stays valid."""
        session = await get_session(session_id)
        await session.clear()
        return "ok"

    @mcp.tool
    async def remember_mine(key: str, value: Any, session: UserSession) -> str:
        """Keep ``value`` under ``key`` in the caller's own bucket (needs auth)."""
        await session.set(key, value)
        return "ok"

    @mcp.tool
    async def recall_mine(key: str, session: UserSession) -> dict[str, Any]:
        """``{"value": the value under key in the caller's own bucket, or null}``."""
        return {"value": await session.get(key)}

    return mcp
