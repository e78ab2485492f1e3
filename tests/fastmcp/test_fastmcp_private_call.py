"""A FastMCP session reached around the hooked ``Session`` methods (a private method such as
``Session._load_raw``): the error says so, and blames the FastMCP version only when the
installed one is not a tested one (``sessionstore.fastmcp.dispatch.TESTED``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastmcp.server.sessions import Session
from key_value.aio.adapters.pydantic import PydanticAdapter

import sessionstore as ss
from sessionstore.aio import AsyncSessionStore
from sessionstore.fastmcp import StoreSessionState
from sessionstore.fastmcp.dispatch import fastmcp_version, is_tested


def test_the_installed_fastmcp_is_a_tested_one() -> None:
    assert is_tested(fastmcp_version()), fastmcp_version()
    assert not is_tested("4.3.0") and not is_tested("4.2.2") and is_tested("4.2.10")


def test_a_private_session_call_is_named_not_the_version(client: Any, table: str) -> None:
    state = StoreSessionState(AsyncSessionStore(ss.SessionStore(client, table)))
    # As FastMCP hands each Session its server's store: an adapter over the state store.
    adapter: PydanticAdapter[Any] = PydanticAdapter(
        key_value=state, pydantic_model=dict, default_collection="fastmcp_state"
    )
    session = Session(store=adapter, principal=None, session_id="s-1", public_id="s-1")

    with pytest.raises(RuntimeError) as refused:
        asyncio.run(session._load_raw())  # a private method: not one the store serves

    message = str(refused.value)
    assert "_load_raw" in message and "private" in message, message
    assert "version" not in message and "written for" not in message, message
