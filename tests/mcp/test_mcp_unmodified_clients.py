"""Clients that know nothing of sessionstore: the SDK's own ``Client``, both protocol eras.

Two server instances behind a round-robin proxy (the load balancer), one of them restarted in
the middle of the session. Legacy clients keep their ``Mcp-Session-Id``; modern clients pass the
handle from the ``open_session`` tool. Tools run once per call and each call is recorded once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import InputRequiredResult

import sessionstore as ss
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import RunningServer, create_app, create_server, current_session, protocol
from sessionstore.mcp.protocol import IdempotencyKey, SessionHandle
from sessionstore.retry import RetryPolicy
from sessionstore.testing import RequestLog
from sessionstore.testing.proxy import RoundRobinProxy
from tests.mcp.test_mcp import KEYS, Tokens

TIMEOUT = 60
LEGACY = "2025-11-25"


def _run(main: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(TIMEOUT):
            return await main()

    return asyncio.run(bounded())


class Instances:
    """Server instances on one table, each its own boto3 client, store and ``MCPServer``."""

    def __init__(
        self,
        engine: LocalDynamoDB,
        table: str,
        *,
        auth: bool = False,
        adopt: bool = False,
        tools: Callable[[MCPServer], None] | None = None,
    ) -> None:
        self.engine = engine
        self.table = table
        self.auth = auth
        self.adopt = adopt
        self.tools = tools
        self.clock = ss.ManualClock("2026-01-01T12:00:00Z")
        self.ids = ss.CounterIds()
        self.stores: list[ss.SessionStore] = []

    def app(self) -> Any:
        store = ss.SessionStore(
            ss.connect(self.engine.endpoint_url),
            self.table,
            clock=self.clock,
            ids=self.ids,
            retry=RetryPolicy(sleep=lambda _s: None),
        )
        self.stores.append(store)
        kwargs: dict[str, Any] = {}
        if self.auth:
            from mcp.server.auth.settings import AuthSettings

            kwargs["token_verifier"] = Tokens({"alice-token": "alice", "bob-token": "bob"})
            kwargs["auth"] = AuthSettings(
                issuer_url="http://127.0.0.1/issuer",  # type: ignore[arg-type]
                resource_server_url=None,
            )
        server = create_server(store, state_keys=KEYS, **kwargs)
        if self.tools is not None:
            self.tools(server)
        return create_app(server, adopt_session_ids=self.adopt)

    def running(self) -> RunningServer:
        return RunningServer(self.app())

    @asynccontextmanager
    async def behind_round_robin(self) -> AsyncIterator[tuple[RoundRobinProxy, Client]]:
        """Two instances behind the round robin, and the SDK's ``Client`` on it."""
        async with self.running() as a, self.running() as b:
            proxy = RoundRobinProxy([_base(a.url), _base(b.url)])
            try:
                async with RunningServer(proxy) as lb, Client(lb.url) as client:
                    yield proxy, client
            finally:
                await proxy.aclose()


def _base(url: str) -> str:
    return url.removesuffix("/mcp")


class SeenIds:
    """Every ``Mcp-Session-Id`` the client sent, per request, and the one it was given
    (httpx event hooks)."""

    def __init__(self) -> None:
        self.sent: list[str | None] = []
        self.given: str | None = None

    async def request(self, request: httpx2.Request) -> None:
        self.sent.append(request.headers.get("mcp-session-id"))

    async def response(self, response: httpx2.Response) -> None:
        self.given = self.given or response.headers.get("mcp-session-id")

    def http(self, **kwargs: Any) -> httpx2.AsyncClient:
        hooks = {"request": [self.request], "response": [self.response]}
        return httpx2.AsyncClient(event_hooks=hooks, timeout=30, **kwargs)

    def client(self, url: str, mode: str) -> Client:
        return Client(streamable_http_client(url, http_client=self.http()), mode=mode)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_an_unmodified_client_keeps_one_session_across_instances_and_a_restart(
    engine: LocalDynamoDB, table: str, mode: str
) -> None:
    instances = Instances(engine, table)
    seen = SeenIds()

    async def main() -> tuple[str, RoundRobinProxy]:
        a = await instances.running().start()
        async with instances.running() as b:
            proxy = RoundRobinProxy([_base(a.url), _base(b.url)])
            async with RunningServer(proxy) as lb, seen.client(lb.url, mode) as client:
                assert (client.protocol_version == LEGACY) is (mode == "legacy")
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert {"calculate", "note", "notes", "open_session", "close_session"} <= names
                handle: dict[str, str] = {}
                if mode == "auto":  # no session in the protocol: the handle is an argument
                    opened = await client.call_tool("open_session", {})
                    handle = {"session_id": opened.structured_content["session_id"]}
                calc = await client.call_tool("calculate", {"expression": "6 * 7"})
                assert calc.structured_content == {"result": 42}
                for i in range(6):
                    if i == 3:  # instance a goes away with whatever it had in memory
                        await a.stop()
                        a2 = await instances.running().start()
                        proxy.set_backends([_base(a2.url), _base(b.url)])
                    instances.clock.advance(ms=1)
                    noted = await client.call_tool("note", {"text": f"n{i}", **handle})
                    assert noted.structured_content["position"] == i + 1
                instances.clock.advance(ms=1)
                listed = await client.call_tool("notes", handle)
                assert listed.structured_content == {"result": [f"n{i}" for i in range(6)]}
                if mode == "auto":
                    closed = await client.call_tool("close_session", handle)
                    assert closed.structured_content["status"] == "closed"
                    sid = handle["session_id"]
                else:
                    assert seen.given is not None
                    sid = seen.given
            await a2.stop()
            await proxy.aclose()
        return sid, proxy

    sid, proxy = _run(main)
    used = {backend for _method, backend in proxy.log}
    assert len(used) == 3  # a, b and the restarted a: the session roamed
    if mode == "legacy":
        # initialize carries no id; every later request the same one, the DELETE included.
        assert seen.sent[0] is None and set(seen.sent[1:]) == {sid}
    else:
        assert set(seen.sent) == {None}  # the modern protocol has no session header
    store = instances.stores[0]
    session, context, history = store.load(sid)
    assert [m["text"] for m in context] == [f"n{i}" for i in range(6)]  # each note once, in order
    # calculate takes no handle: a modern client's call of it is in no session.
    in_session = ["calculate"] if mode == "legacy" else []
    assert [r.tool_name for r in history] == [*in_session, *["note"] * 6, "notes"]
    assert session.status is ss.Status.CLOSED  # legacy: the client's DELETE closed it
    if mode == "legacy":
        assert session.attributes["protocolVersion"] == LEGACY
        assert session.attributes["clientInfo"]["name"] == "mcp"


def _post(url: str, session_id: str | None, token: str | None = None) -> httpx2.Response:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": LEGACY,
    }
    if session_id is not None:
        headers["mcp-session-id"] = session_id
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    with httpx2.Client(timeout=10) as http:
        return http.post(url, headers=headers, content=json.dumps(body))


def test_unknown_expired_closed_and_foreign_legacy_ids_get_the_same_404(
    engine: LocalDynamoDB, table: str
) -> None:
    instances = Instances(engine, table, auth=True)
    seen = SeenIds()

    async def main() -> dict[str, tuple[int, str]]:
        async with instances.running() as a:
            answers: dict[str, tuple[int, str]] = {}
            http = seen.http(headers={"Authorization": "Bearer alice-token"})
            async with Client(streamable_http_client(a.url, http_client=http), mode="legacy"):
                sid = seen.given
                assert sid is not None
                live = await asyncio.to_thread(_post, a.url, sid, "alice-token")
                assert live.status_code == 200
                for name, session_id, token in (
                    ("unknown", "no-such-session", "alice-token"),
                    ("foreign", sid, "bob-token"),
                ):
                    response = await asyncio.to_thread(_post, a.url, session_id, token)
                    answers[name] = (response.status_code, response.text)
                instances.clock.advance(seconds=3601)  # the demo server's default ttl passes
                response = await asyncio.to_thread(_post, a.url, sid, "alice-token")
                answers["expired"] = (response.status_code, response.text)
            # The client's DELETE on leaving: refused as expired, and no 500 anywhere.
            closed = instances.stores[0].create_session(owner="alice")
            instances.stores[0].activate(closed.session_id, owner="alice")
            instances.stores[0].begin_close(closed.session_id, owner="alice")
            response = await asyncio.to_thread(_post, a.url, closed.session_id, "alice-token")
            answers["closing"] = (response.status_code, response.text)
        return answers

    answers = _run(main)
    assert {status for status, _ in answers.values()} == {404}
    assert len({text for _, text in answers.values()}) == 1  # indistinguishable


def test_unknown_tools_and_invalid_arguments_get_the_sdks_errors_and_write_nothing(
    engine: LocalDynamoDB, table: str
) -> None:
    instances = Instances(engine, table)

    async def main() -> None:
        async with instances.running() as a, Client(a.url, mode="legacy") as client:
            store = instances.stores[0]
            await client.list_tools()  # after notifications/initialized, which is sent apart
            with RequestLog(store.client) as log:
                unknown = await client.call_tool("no_such_tool", {})
                invalid = await client.call_tool("note", {"text": 5})
            assert unknown.is_error and unknown.content[0].text == "Unknown tool: no_such_tool"
            assert invalid.is_error and "validation error" in invalid.content[0].text
            # Only the legacy layer's session check per request: nothing claimed or recorded.
            assert log.counts() == {"GetItem": 2}

    _run(main)


def test_a_session_tool_without_a_session_says_how_to_get_one(
    engine: LocalDynamoDB, table: str
) -> None:
    instances = Instances(engine, table)

    async def main() -> None:
        async with instances.running() as a, Client(a.url) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("note", {"text": "x"})
            assert refused.value.code == protocol.SESSION_REQUIRED
            assert "call the tool 'open_session'" in refused.value.message
            assert (await client.call_tool("calculate", {"expression": "1+1"})).structured_content
            with pytest.raises(MCPError) as foreign:
                await client.call_tool("note", {"text": "x", "session_id": "no-such-session"})
            assert foreign.value.code == protocol.SESSION_NOT_FOUND

    _run(main)


def test_requests_per_call_for_each_way_in(engine: LocalDynamoDB, table: str) -> None:
    """What each way in costs on a warm instance, counted at the engine."""
    instances = Instances(engine, table)

    async def main() -> dict[str, dict[str, int]]:
        costs: dict[str, dict[str, int]] = {}
        async with instances.running() as a:
            store = instances.stores[0]
            async with Client(a.url, mode="legacy") as legacy:
                await legacy.list_tools()  # after notifications/initialized, which is sent apart
                await legacy.call_tool("note", {"text": "warm"})
                with RequestLog(store.client) as log:
                    await legacy.call_tool("note", {"text": "legacy"})
                costs["legacy note"] = dict(log.counts())
                with RequestLog(store.client) as log:
                    await legacy.call_tool("notes", {})
                costs["legacy notes (read-only)"] = dict(log.counts())
                with RequestLog(store.client) as log:
                    await legacy.list_tools()
                costs["legacy tools/list"] = dict(log.counts())
            async with Client(a.url) as modern:
                opened = await modern.call_tool("open_session", {})
                handle = {"session_id": opened.structured_content["session_id"]}
                with RequestLog(store.client) as log:
                    await modern.call_tool("note", {"text": "modern", **handle})
                costs["handle note"] = dict(log.counts())
                with RequestLog(store.client) as log:
                    await modern.call_tool("notes", handle)
                costs["handle notes (read-only)"] = dict(log.counts())
                with RequestLog(store.client) as log:
                    await modern.call_tool("calculate", {"expression": "1"})
                costs["no session"] = dict(log.counts())
        return costs

    costs = _run(main)
    # The note's own append is 2 writes (UpdateItem + PutItem); the rest is the session's.
    append = {"UpdateItem": 1, "PutItem": 1}
    # A call that changes something: the claim (a transaction) and its completion (UpdateItem);
    # the legacy layer reads the session its Mcp-Session-Id names first.
    claimed = {"TransactWriteItems": 1, "UpdateItem": 1 + append["UpdateItem"], "PutItem": 1}
    assert costs["legacy note"] == {"GetItem": 1, **claimed}
    assert costs["handle note"] == claimed
    # A read-only tool: the session read, the tool's own Query, one PutItem of the record.
    harmless = {"GetItem": 1, "Query": 1, "PutItem": 1}
    assert costs["legacy notes (read-only)"] == harmless
    assert costs["legacy tools/list"] == {"GetItem": 1}
    assert costs["handle notes (read-only)"] == harmless
    assert costs["no session"] == {}


def test_an_idempotency_key_argument_makes_a_retry_replay(
    engine: LocalDynamoDB, table: str
) -> None:
    runs: list[str] = []

    def tools(server: MCPServer) -> None:
        @server.tool()
        async def pay(
            amount: int, session_id: SessionHandle = None, idempotency_key: IdempotencyKey = None
        ) -> str:
            """Not idempotent by itself: the key is what makes a retry safe."""
            runs.append(current_session().tool_call_id)
            return f"paid {amount}"

    instances = Instances(engine, table, tools=tools)

    async def main() -> None:
        async with (
            instances.running() as a,
            instances.running() as b,
            Client(a.url) as first,
            Client(b.url) as second,
        ):
            opened = await first.call_tool("open_session", {})
            sid = opened.structured_content["session_id"]
            call = {"amount": 5, "session_id": sid, "idempotency_key": "order-1"}
            paid = await first.call_tool("pay", call)
            again = await second.call_tool("pay", call)  # the retry, on another instance
            assert paid.content[0].text == again.content[0].text == "paid 5"
            assert (again.meta or {}).get(protocol.REPLAYED_KEY) is True
            other = await second.call_tool("pay", {**call, "idempotency_key": "order-2"})
            assert (other.meta or {}).get(protocol.REPLAYED_KEY) is None
            with pytest.raises(MCPError) as reused:
                await first.call_tool("pay", {**call, "amount": 6})
            assert reused.value.code == protocol.TOOL_CALL_ID_REUSED
        history = instances.stores[0].load(sid).tool_calls
        assert [r.tool_call_id for r in history] == ["order-1", "order-2"]

    _run(main)
    assert runs == ["order-1", "order-2"]


def test_a_multi_round_trip_tool_runs_each_round_once_behind_its_claim(
    engine: LocalDynamoDB, table: str
) -> None:
    rounds: list[str | None] = []

    def tools(server: MCPServer) -> None:
        @server.tool()
        async def two_rounds(
            ctx: Context, session_id: SessionHandle = None, idempotency_key: IdempotencyKey = None
        ) -> str | InputRequiredResult:
            """Answers input_required first; finishes when the state comes back."""
            rounds.append(ctx.request_state)
            if ctx.request_state is None:
                return InputRequiredResult(request_state="round-1")
            return f"finished after {ctx.request_state}"

    instances = Instances(engine, table, tools=tools)

    async def main() -> None:
        async with instances.behind_round_robin() as (proxy, client):
            opened = await client.call_tool("open_session", {})
            sid = opened.structured_content["session_id"]
            call = {"session_id": sid, "idempotency_key": "mrtr-1"}
            done = await client.call_tool("two_rounds", call)
            assert done.content[0].text == "finished after round-1"
            again = await client.call_tool("two_rounds", call)
            assert again.content[0].text == "finished after round-1"
            assert (again.meta or {}).get(protocol.REPLAYED_KEY) is True
            assert len(set(proxy.counts)) == 2  # the rounds went to both instances
        history = instances.stores[0].load(sid).tool_calls
        assert [r.tool_call_id for r in history] == ["mrtr-1"]

    _run(main)
    assert rounds == [None, "round-1"]  # the tool saw its own state, not the claim around it


def test_a_later_round_on_a_session_closed_since_is_refused_unrun(
    engine: LocalDynamoDB, table: str
) -> None:
    """Review: a later round carried its claim and ran without checking the session again."""
    rounds: list[str | None] = []
    instances: Instances

    def tools(server: MCPServer) -> None:
        @server.tool()
        async def two_rounds(
            ctx: Context, session_id: SessionHandle = None, idempotency_key: IdempotencyKey = None
        ) -> str | InputRequiredResult:
            """Closes its own session between the rounds."""
            rounds.append(ctx.request_state)
            if ctx.request_state is None:
                store = instances.stores[0]
                store.begin_close(current_session().session_id)
                store.close(current_session().session_id)
                return InputRequiredResult(request_state="round-1")
            return f"finished after {ctx.request_state}"

    instances = Instances(engine, table, tools=tools)

    async def main() -> None:
        async with instances.running() as a, Client(a.url) as client:
            opened = await client.call_tool("open_session", {})
            sid = opened.structured_content["session_id"]
            with pytest.raises(MCPError) as refused:
                await client.call_tool("two_rounds", {"session_id": sid, "idempotency_key": "k"})
            assert "closed" in str(refused.value)
        assert instances.stores[0].get_session(sid).status is ss.Status.CLOSED
        assert [r.tool_call_id for r in instances.stores[0].load(sid).tool_calls] == []

    _run(main)
    assert rounds == [None]  # the second round never ran


def test_adopted_ids_405_on_get_and_delete_of_an_unknown_id(
    engine: LocalDynamoDB, table: str
) -> None:
    instances = Instances(engine, table, adopt=True)

    async def main() -> dict[str, httpx2.Response]:
        async with instances.running() as a, httpx2.AsyncClient(timeout=10) as http:
            answers = {
                "adopted": await asyncio.to_thread(_post, a.url, "platform-minted-1"),
                "again": await asyncio.to_thread(_post, a.url, "platform-minted-1"),
                "get": await http.get(a.url, headers={"accept": "text/event-stream"}),
                "delete": await http.delete(a.url, headers={"mcp-session-id": "platform-minted-1"}),
                "after delete": await asyncio.to_thread(_post, a.url, "platform-minted-1"),
            }
        return answers

    answers = _run(main)
    assert answers["adopted"].status_code == answers["again"].status_code == 200
    assert answers["get"].status_code == 405
    assert answers["get"].headers["allow"] == "POST, DELETE"
    assert answers["delete"].status_code == 200
    assert answers["after delete"].status_code == 404  # closed: adoption never reopens
    session = instances.stores[0].get_session("platform-minted-1")
    assert session.status is ss.Status.CLOSED


def test_a_short_request_state_key_is_one_clear_error() -> None:
    with pytest.raises(ss.InvalidInput) as short:
        create_server(None, state_keys=["0123456789"])
    assert str(short.value) == (
        "state_keys: key 1 has 10 bytes; each requestState key needs at least 32 (the MCP "
        "SDK's rule)"
    )


def test_readme_plain_client_snippet_runs_against_the_demo_server(
    engine: LocalDynamoDB, table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    marker = "<!-- mcp-plain-client-snippet -->"
    block = readme.split(marker)[1].split("<!-- /mcp-plain-client-snippet -->")[0]
    code = block.split("```python")[1].split("```")[0]
    url = "http://127.0.0.1:8765/mcp"
    assert "asyncio.run(main())" in code and url in code and "sessionstore" not in code
    instances = Instances(engine, table)

    async def main() -> None:
        async with instances.running() as running:
            namespace: dict[str, Any] = {}
            exec(code.replace("asyncio.run(main())", "").replace(url, running.url), namespace)
            await namespace["main"]()

    _run(main)
    assert capsys.readouterr().out.splitlines() == [
        "{'result': 42}",
        "{'position': 1, 'version': 3}",
        "{'result': ['buy milk']}",
        "{'position': 1, 'version': 3}",
        "{'result': ['call mum']}",
        "closed",
    ]


def test_a_read_only_tool_on_a_dead_or_unknown_handle_gets_the_sessions_error(
    engine: LocalDynamoDB, table: str
) -> None:
    instances = Instances(engine, table)

    async def main() -> None:
        async with instances.running() as a, Client(a.url) as client:
            with pytest.raises(MCPError) as unknown:  # never seen here: checked before it runs
                await client.call_tool("notes", {"session_id": "no-such-session"})
            assert unknown.value.code == protocol.SESSION_NOT_FOUND
            opened = await client.call_tool("open_session", {})
            handle = {"session_id": opened.structured_content["session_id"]}
            await client.call_tool("close_session", handle)
            with pytest.raises(MCPError) as closed:  # refused by the session check, unrun
                await client.call_tool("notes", handle)
            assert closed.value.code == protocol.SESSION_NOT_ACTIVE
            assert "executed" not in (closed.value.data or {})

    _run(main)


def test_a_client_with_capabilities_too_large_to_keep_still_gets_a_session(
    engine: LocalDynamoDB, table: str
) -> None:
    instances = Instances(engine, table)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {"experimental": {"big": {"blob": "x" * 5000}}},
            "clientInfo": {"name": "big-client", "version": "1"},
        },
    }

    async def main() -> str:
        async with instances.running() as a, httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(
                a.url,
                content=json.dumps(initialize),
                headers={
                    "accept": "application/json, text/event-stream",
                    "content-type": "application/json",
                },
            )
            assert response.status_code == 200
            return response.headers["mcp-session-id"]

    session_id = _run(main)
    session = instances.stores[0].get_session(session_id)
    assert session.status is ss.Status.ACTIVE
    assert dict(session.attributes) == {
        "protocolVersion": LEGACY,
        "clientInfo": {"name": "big-client", "version": "1"},
    }
