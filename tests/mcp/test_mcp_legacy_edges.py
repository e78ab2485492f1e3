"""The legacy ``Mcp-Session-Id`` layer at its edges, over real HTTP on loopback.

What a client sends never gets a 5xx: an ``initialize`` the SDK takes opens a session with what
of it the store can keep, and one the SDK refuses gets the SDK's own answer (compared with a
bare SDK server's). The store failing while an id is adopted is a 503 (retry), never a 404
(start over), and the same id is adopted once the store is back.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp_types import Icon, Implementation

import sessionstore as ss
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import RunningServer
from sessionstore.testing import Fault, FaultInjector
from tests.mcp.test_mcp_unmodified_clients import LEGACY, Instances, SeenIds, _post, _run

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
#: A 6 KB PNG as a data URI, as MCP 2025-11-25 allows in ``clientInfo.icons``.
DATA_URI = "data:image/png;base64," + base64.b64encode(bytes(range(256)) * 24).decode()


def _initialize(params: str) -> str:
    """An ``initialize`` request's text around ``params`` (JSON text, written as a client may)."""
    return f'{{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {params}}}'


async def _send(http: httpx2.AsyncClient, url: str, body: str) -> httpx2.Response:
    return await http.post(url, content=body.encode(), headers=HEADERS)


def test_a_client_with_a_data_uri_icon_opens_a_session_that_works(
    engine: LocalDynamoDB, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    instances = Instances(engine, table)
    seen = SeenIds()
    icon = Icon(src=DATA_URI, mime_type="image/png", sizes=["48x48"])
    info = Implementation(name="icon-client", version="1.0", icons=[icon])

    async def main() -> None:
        async with instances.running() as a:
            transport = streamable_http_client(a.url, http_client=seen.http())
            async with Client(transport, mode="legacy", client_info=info) as client:
                assert "note" in {tool.name for tool in (await client.list_tools()).tools}
                noted = await client.call_tool("note", {"text": "hello"})
                assert noted.structured_content["position"] == 1

    with caplog.at_level(logging.INFO, logger="sessionstore.mcp.http_sessions"):
        _run(main)
    assert seen.given is not None and set(seen.sent[1:]) == {seen.given}
    session, context, history = instances.stores[0].load(seen.given)
    assert session.attributes["protocolVersion"] == LEGACY
    assert session.attributes["clientInfo"] == {"name": "icon-client", "version": "1.0"}
    assert "clientCapabilities" in session.attributes  # the icon went, the rest was kept
    assert context == [{"role": "note", "text": "hello"}]
    assert [r.tool_name for r in history] == ["note"]
    said = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
    assert len(said) == 1 and "clientInfo.icons" in said[0] and seen.given in said[0]


@pytest.mark.parametrize(
    ("params", "kept"),
    [
        pytest.param(
            '{"protocolVersion": "2025-11-25", "clientInfo": {"name": "nan", "version": "1"},'
            ' "capabilities": {"sampling": {}, "experimental": {"x": {"score": NaN}}}}',
            {
                "protocolVersion": LEGACY,
                "clientInfo": {"name": "nan", "version": "1"},
                "clientCapabilities": {"sampling": {}},
            },
            id="NaN-in-capabilities",
        ),
        pytest.param(
            '{"protocolVersion": "2025-11-25", "capabilities": {"experimental": {"x": 1e999}},'
            ' "clientInfo": {"name": "inf", "version": "1", "rating": -Infinity}}',
            {
                "protocolVersion": LEGACY,
                "clientInfo": {"name": "inf", "version": "1"},
                "clientCapabilities": {},
            },
            id="Infinity",
        ),
        pytest.param(
            json.dumps(
                {
                    "protocolVersion": LEGACY,
                    "capabilities": {"roots": {"listChanged": True}},
                    "clientInfo": {"name": "n" * 6000, "version": "1", "description": "d" * 500},
                }
            ),
            {"protocolVersion": LEGACY, "clientInfo": {"name": "n" * 128, "version": "1"}},
            id="6KB-name",
        ),
    ],
)
def test_an_initialize_the_sdk_takes_opens_a_session_with_what_can_be_kept(
    engine: LocalDynamoDB, table: str, params: str, kept: dict[str, Any]
) -> None:
    instances = Instances(engine, table)
    bare = MCPServer("bare").streamable_http_app(stateless_http=True)

    async def main() -> tuple[httpx2.Response, httpx2.Response, httpx2.Response]:
        async with (
            instances.running() as a,
            RunningServer(bare) as sdk,
            httpx2.AsyncClient(timeout=10) as http,
        ):
            ours = await _send(http, a.url, _initialize(params))
            theirs = await _send(http, sdk.url, _initialize(params))
            listed = await asyncio.to_thread(_post, a.url, ours.headers.get("mcp-session-id"))
        return ours, theirs, listed

    ours, theirs, listed = _run(main)
    assert theirs.status_code == ours.status_code == 200
    assert listed.status_code == 200 and '"note"' in listed.text  # the session works
    session = instances.stores[0].get_session(ours.headers["mcp-session-id"])
    assert session.status is ss.Status.ACTIVE
    assert dict(session.attributes) == kept


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(
            _initialize(
                '{"protocolVersion": "2025-11-25", "capabilities": {},'
                ' "clientInfo": {"name": "\\ud800", "version": "1"}}'
            ),
            id="lone-surrogate",
        ),
        pytest.param(
            _initialize(
                '{"protocolVersion": "2025-11-25", "clientInfo": {"name": "deep", "version": "1"},'
                ' "capabilities": {"experimental": {"x": '
                + '[{"a": ' * 5000
                + "1"
                + "}]" * 5000
                + "}}}"
            ),
            id="10000-levels",
        ),
    ],
)
def test_an_initialize_the_sdk_refuses_gets_the_sdks_answer(
    engine: LocalDynamoDB, table: str, body: str
) -> None:
    instances = Instances(engine, table)
    bare = MCPServer("bare").streamable_http_app(stateless_http=True)

    async def main() -> tuple[httpx2.Response, httpx2.Response]:
        async with (
            instances.running() as a,
            RunningServer(bare) as sdk,
            httpx2.AsyncClient(timeout=10) as http,
        ):
            return await _send(http, a.url, body), await _send(http, sdk.url, body)

    ours, theirs = _run(main)
    assert ours.status_code == theirs.status_code == 400
    assert ours.json() == theirs.json()
    assert ours.json()["error"]["code"] == -32700  # the SDK's parse error
    assert "mcp-session-id" not in ours.headers


def _fail(store: ss.SessionStore, *operations: str) -> FaultInjector:
    """Every request of these operations answered with a 500, after every retry: Unavailable."""
    return FaultInjector(store.client, rates={Fault.SERVER_ERROR: 1.0}, operations=operations)


@pytest.mark.parametrize(
    "failing",
    [
        pytest.param(("PutItem", "TransactWriteItems"), id="creating"),
        pytest.param(("UpdateItem",), id="activating"),
    ],
)
def test_adopting_an_id_while_the_store_fails_is_503_then_the_id_is_adopted(
    engine: LocalDynamoDB, table: str, failing: tuple[str, ...]
) -> None:
    instances = Instances(engine, table, adopt=True)

    async def main() -> tuple[httpx2.Response, httpx2.Response, int]:
        async with instances.running() as a:
            with _fail(instances.stores[0], *failing) as faults:
                refused = await asyncio.to_thread(_post, a.url, "platform-minted-1")
            adopted = await asyncio.to_thread(_post, a.url, "platform-minted-1")
        return refused, adopted, sum(faults.injected.values())

    refused, adopted, injected = _run(main)
    assert injected > 0
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == -32603
    assert adopted.status_code == 200 and '"note"' in adopted.text
    session = instances.stores[0].get_session("platform-minted-1")
    assert session.status is ss.Status.ACTIVE


def test_an_id_adopted_elsewhere_first_while_the_store_fails_is_503(
    engine: LocalDynamoDB, table: str
) -> None:
    """Read: not there; create: another instance created it meanwhile; read again: the store
    fails. That is a 503 too, and the id is served once the store is back."""
    instances = Instances(engine, table, adopt=True)
    sid = "platform-minted-2"

    async def main() -> tuple[httpx2.Response, httpx2.Response, list[str]]:
        async with instances.running() as a:
            store = instances.stores[0]
            other = ss.SessionStore(ss.connect(engine.endpoint_url), table, clock=instances.clock)
            reads = _fail(store, "GetItem", "Query")
            seen: list[str] = []

            def rival_first(**kwargs: Any) -> None:
                seen.append(kwargs["event_name"])
                if len(seen) == 1:  # the other instance's adoption lands first
                    other.activate(other.create_session(sid).session_id)
                    reads.attach()  # and the store fails from here on

            event = "before-send.dynamodb.PutItem"
            store.client.meta.events.register(event, rival_first)
            try:
                refused = await asyncio.to_thread(_post, a.url, sid)
            finally:
                store.client.meta.events.unregister(event, rival_first)
                reads.detach()
            served = await asyncio.to_thread(_post, a.url, sid)
        return refused, served, seen

    refused, served, seen = _run(main)
    assert seen == ["before-send.dynamodb.PutItem"]  # one create, refused as taken
    assert refused.status_code == 503
    assert served.status_code == 200 and '"note"' in served.text
    assert instances.stores[0].get_session(sid).status is ss.Status.ACTIVE
