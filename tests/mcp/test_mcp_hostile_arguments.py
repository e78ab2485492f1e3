"""Hostile values a client can send in a ``tools/call``: each is refused before the tool runs,
or the tool runs once and a repeat is answered from the record -- never a run whose result is
lost.

Through the SDK's own ``Client`` on two instances behind the round robin: the first delivery
reaches one instance, the repeat the other. The SDK serializes JSON itself and cannot send
``1e400``, ``NaN`` or a lone surrogate, so its HTTP client puts those literals into the body
in place of a marker string (``Literals``), on the wire, as a hostile client would send them.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Coroutine, Iterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations
from mcp_types import INVALID_PARAMS, PARSE_ERROR

import sessionstore as ss
from sessionstore import claims, schema
from sessionstore.claims import State
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import RunningServer, protocol
from sessionstore.mcp.protocol import IdempotencyKey, SessionHandle
from sessionstore.testing.proxy import RoundRobinProxy
from tests.conftest import PREFIX
from tests.mcp.test_mcp_unmodified_clients import TIMEOUT, Instances, _base, _run

MARK = "@@hostile@@"  # replaced on the wire by the case's literal
KEY = "k-1"
ODD_TOOL = "billing.v1:charge#now"


class Literals(httpx2.AsyncHTTPTransport):
    """Sends each body with ``"@@hostile@@"`` (the JSON string) replaced by raw JSON text."""

    def __init__(self, literal: bytes) -> None:
        super().__init__()
        self.literal = literal

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = request.content
        hostile = body.replace(json.dumps(MARK).encode(), self.literal)
        if hostile != body:
            headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"content-length"]
            request = httpx2.Request(
                request.method,
                request.url,
                headers=headers,
                content=hostile,
                extensions=request.extensions,
            )
        return await super().handle_async_request(request)


class Runs:
    """Tools that count their runs: the proof of "never ran" and "ran once"."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    def tools(self, server: MCPServer) -> None:
        @server.tool()
        async def stash(
            value: Any = None,
            session_id: SessionHandle = None,
            idempotency_key: IdempotencyKey = None,
        ) -> str:
            """Claimed: runs at most once per key."""
            self.runs.append("stash")
            return f"stashed a {type(value).__name__}"

        @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
        async def peek(value: Any = None, session_id: SessionHandle = None) -> str:
            """Read-only: not claimed, recorded after it runs."""
            self.runs.append("peek")
            return f"peeked at a {type(value).__name__}"

        @server.tool(name=ODD_TOOL)
        async def charge(session_id: SessionHandle = None) -> str:
            """A tool name with a dot, a colon and a hash."""
            self.runs.append(ODD_TOOL)
            return "charged"


REFUSED, ONCE = "refused", "once"
DEEP = b"[" * 10_000 + b"]" * 10_000
BIG_KEY = b'{"' + b"k" * 65_536 + b'": 1}'
MARK_KEY = {MARK: 1}  # the marker as an object key: its literal is a quoted key

#: (id, tool, arguments, _meta, literal, outcome, refusal code)
CASES: list[tuple[str, str, dict[str, Any], dict[str, Any] | None, bytes, str, int]] = [
    ("arg 1e400", "stash", {"value": MARK}, None, b"1e400", REFUSED, INVALID_PARAMS),
    ("arg -1e400", "stash", {"value": MARK}, None, b"-1e400", REFUSED, INVALID_PARAMS),
    ("arg NaN", "stash", {"value": MARK}, None, b"NaN", REFUSED, INVALID_PARAMS),
    ("arg Infinity", "stash", {"value": MARK}, None, b"Infinity", REFUSED, INVALID_PARAMS),
    ("arg -Infinity", "stash", {"value": [MARK]}, None, b"-Infinity", REFUSED, INVALID_PARAMS),
    ("nested 1e400", "stash", {"value": {"a": [MARK]}}, None, b"1e400", REFUSED, INVALID_PARAMS),
    ("read-only 1e400", "peek", {"value": MARK}, None, b"1e400", REFUSED, INVALID_PARAMS),
    ("read-only NaN", "peek", {"value": MARK}, None, b"NaN", REFUSED, INVALID_PARAMS),
    ("int 41 digits", "stash", {"value": MARK}, None, b"-" + b"9" * 41, ONCE, 0),
    ("int 5000 digits", "stash", {"value": MARK}, None, b"9" * 5000, REFUSED, PARSE_ERROR),
    ("surrogate value", "stash", {"value": MARK}, None, b'"\\ud800"', REFUSED, INVALID_PARAMS),
    ("surrogate key", "stash", {"value": MARK_KEY}, None, b'"\\udfff"', REFUSED, INVALID_PARAMS),
    ("read-only surrogate", "peek", {"value": MARK}, None, b'"x\\udbff"', REFUSED, INVALID_PARAMS),
    (
        "nesting 300",
        "stash",
        {"value": MARK},
        None,
        b"[" * 300 + b"]" * 300,
        REFUSED,
        INVALID_PARAMS,
    ),
    ("nesting 10,000", "stash", {"value": MARK}, None, DEEP, REFUSED, PARSE_ERROR),
    ("key 64 KB", "stash", {"value": MARK}, None, BIG_KEY, ONCE, 0),
    ("key # : .", "stash", {"value": MARK_KEY}, None, b'"a#b:c.d"', ONCE, 0),
    ("meta 1e400", "stash", {}, {"io.example/x": MARK}, b"1e400", ONCE, 0),
    ("meta NaN", "stash", {}, {"io.example/x": MARK}, b"NaN", ONCE, 0),
    ("meta -Infinity", "stash", {}, {"io.example/x": MARK}, b"-Infinity", ONCE, 0),
    ("meta int 41 digits", "stash", {}, {"io.example/x": MARK}, b"9" * 41, ONCE, 0),
    ("meta surrogate", "stash", {}, {"io.example/x": MARK}, b'"\\ud800"', ONCE, 0),
    ("meta surrogate key", "stash", {}, MARK_KEY, b'"\\udfff"', REFUSED, INVALID_PARAMS),
    ("meta nesting 10,000", "stash", {}, {"io.example/x": MARK}, DEEP, REFUSED, PARSE_ERROR),
    ("meta key 64 KB", "stash", {}, {"io.example/x": MARK}, BIG_KEY, ONCE, 0),
    ("meta key # : .", "stash", {}, MARK_KEY, b'"io.example/a#b:c.d"', ONCE, 0),
    ("meta key id # : .", "stash", {}, {protocol.TOOL_CALL_ID_KEY: MARK}, b'"k#1:2.3"', ONCE, 0),
    (
        "meta key id 1e400",
        "stash",
        {},
        {protocol.TOOL_CALL_ID_KEY: MARK},
        b"1e400",
        REFUSED,
        INVALID_PARAMS,
    ),
    (
        "meta key id surrogate",
        "stash",
        {},
        {protocol.TOOL_CALL_ID_KEY: MARK},
        b'"k\\ud800"',
        REFUSED,
        INVALID_PARAMS,
    ),
    ("tool name # : .", ODD_TOOL, {}, {protocol.TOOL_CALL_ID_KEY: KEY, "x": MARK}, b"1", ONCE, 0),
]


def _replayed(result: Any) -> bool:
    return (result.meta or {}).get(protocol.REPLAYED_KEY) is True


class Served:
    """Two instances on one table behind the round robin, served for the whole module on an
    event loop of their own (a thread): a case costs its requests, not three servers' start."""

    def __init__(self, engine: LocalDynamoDB, table: str) -> None:
        self.runs = Runs()
        self.instances = Instances(engine, table, tools=self.runs.tools)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.servers: list[RunningServer] = []
        self.proxy = RoundRobinProxy([])

    def __enter__(self) -> Served:
        self.thread.start()
        self._on_loop(self._start())
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._on_loop(self._stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(TIMEOUT)
            self.loop.close()

    @property
    def url(self) -> str:
        return self.servers[-1].url

    def _on_loop(self, step: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(step, self.loop).result(TIMEOUT)

    async def _start(self) -> None:
        for _ in range(2):
            self.servers.append(await self.instances.running().start())
        self.proxy.set_backends([_base(s.url) for s in self.servers])
        self.servers.append(await RunningServer(self.proxy).start())

    async def _stop(self) -> None:
        for server in reversed(self.servers):
            await server.stop()
        await self.proxy.aclose()


@pytest.fixture(scope="module")
def served(engine: LocalDynamoDB) -> Iterator[Served]:
    table = f"{PREFIX}hostile-arguments-{uuid.uuid4().hex[:8]}"
    ss.SessionStore(ss.connect(engine.endpoint_url), table).create_table()
    with Served(engine, table) as running:
        yield running


#: Also with a handshake-era client, whose requests carry ``Mcp-Session-Id`` (the legacy layer,
#: whose transport parses JSON itself: a lone surrogate is its parse error there).
LEGACY = {"arg 1e400": 0, "surrogate key": PARSE_ERROR, "read-only NaN": 0, "meta NaN": 0}


def _legacy(case: tuple[Any, ...]) -> Any:
    *rest, code = case[1:]
    return pytest.param("legacy", *rest, LEGACY[case[0]] or code, id=f"legacy {case[0]}")


@pytest.mark.parametrize(
    ("mode", "tool", "arguments", "meta", "literal", "outcome", "code"),
    [pytest.param("auto", *case[1:], id=case[0]) for case in CASES]
    + [_legacy(case) for case in CASES if case[0] in LEGACY],
)
def test_a_hostile_value_is_refused_before_running_or_runs_once_and_is_replayed(
    served: Served,
    mode: str,
    tool: str,
    arguments: dict[str, Any],
    meta: dict[str, Any] | None,
    literal: bytes,
    outcome: str,
    code: int,
) -> None:
    served.runs.runs.clear()

    async def main() -> tuple[str, list[Any], list[str]]:
        http = httpx2.AsyncClient(transport=Literals(literal), timeout=TIMEOUT)
        async with (
            http,
            Client(streamable_http_client(served.url, http_client=http), mode=mode) as client,
        ):
            opened = await client.call_tool("open_session", {})
            sid = opened.structured_content["session_id"]
            call = {**arguments, "session_id": sid}
            if tool == "stash" and not (meta and protocol.TOOL_CALL_ID_KEY in meta):
                call["idempotency_key"] = KEY
            answers: list[Any] = []
            before = len(served.proxy.log)
            for _ in range(2):  # the first delivery, then its repeat
                try:
                    answers.append(await client.call_tool(tool, call, meta=meta))
                except MCPError as exc:
                    answers.append(exc)
            routed = [backend for method, backend in served.proxy.log[before:] if method == "POST"]
        return sid, answers, routed

    sid, (first, again), routed = _run(main)
    assert len(set(routed)) == len(routed) == 2  # the repeat reached the other instance
    store = served.instances.stores[0]
    calls = list(store.table.query(schema.pk(sid), schema.TOOL_PREFIX, schema.TOOLS_END))
    if outcome == REFUSED:
        # Never ran, nothing claimed: a client's retry meets the same refusal, not a lost run.
        assert served.runs.runs == [], f"the tool ran and was answered {first}"
        for answer in (first, again):
            assert isinstance(answer, MCPError), answer
            assert answer.error.code == code, answer.error
        assert calls == []
    else:
        # Ran once; the repeat is the recorded result, served by the other instance.
        assert served.runs.runs == [tool], (served.runs.runs, first)
        assert not isinstance(first, MCPError), first.error
        assert not isinstance(again, MCPError), again.error
        assert not first.is_error and not _replayed(first), first
        assert _replayed(again) and again.content == first.content
        assert [c["state"] for c in calls] == ["recorded"]


# ---------------------------------------------------------------------------- the core's claims


def test_an_output_json_cannot_hold_is_recorded_as_why_and_arguments_are_refused_unclaimed(
    store: ss.SessionStore, active: ss.Session
) -> None:
    """The core's claims, which the extension runs: a tool's own output that JSON cannot
    hold (its NaN, a lone surrogate) still completes the call, so a repeat is answered from
    the record; arguments it could not hold are refused before anything is claimed."""
    sid, ttl = active.session_id, active.ttl
    claimed = claims.claim(
        store.table, sid, "c-1", "t", {"x": 1}, owner="alice", ttl=ttl, lease_ms=60_000
    )
    assert claimed.state is State.CLAIMED
    output = {"v": float("nan"), "s": "\ud800"}
    claims.complete(store.table, sid, "c-1", claimed.claim, {"x": 1}, output, 5)
    repeat = claims.claim(
        store.table, sid, "c-1", "t", {"x": 1}, owner="alice", ttl=ttl, lease_ms=60_000
    )
    assert repeat.state is State.RECORDED and repeat.record is not None
    assert repeat.record.input == {"x": 1}
    assert "not JSON compliant" in repeat.record.output["unrecordable"]
    for arguments in ({"x": float("inf")}, {"x": float("nan")}, {"\ud800": 1}):
        with pytest.raises(ss.InvalidInput, match="arguments"):
            claims.claim(
                store.table, sid, "c-2", "t", arguments, owner="alice", ttl=ttl, lease_ms=1
            )
    calls = store.table.query(schema.pk(sid), schema.TOOL_PREFIX, schema.TOOLS_END)
    assert [c["toolCallId"] for c in calls] == ["c-1"]
