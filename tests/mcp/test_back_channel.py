"""Server-to-client requests in a handshake-era session, answered through the table.

The core (``sessionstore.asks``) against the embedded engine, then the SDK's own ``Client`` over
real HTTP on loopback: two instances on one table behind the round robin, so the client's answer
reaches the other instance than the one whose tool is waiting.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.server.mcpserver import Context
from mcp_types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

import sessionstore as ss
from sessionstore import asks, schema, sizing
from sessionstore.conditions import item_to_wire as to_wire_item
from sessionstore.conformance import fixtures as fx
from sessionstore.errors import ItemTooLarge, SessionExpired, SessionNotActive, SessionNotFound
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import RunningServer, create_app, create_server, protocol
from sessionstore.mcp.protocol import IdempotencyKey
from sessionstore.mcp.relay import ASK_ID_PREFIX, POLLS
from sessionstore.retry import RetryPolicy
from sessionstore.testing import RequestLog
from sessionstore.testing.proxy import RoundRobinProxy
from sessionstore.wire import to_python
from tests.conftest import scan

KEYS = ["test-request-state-key-0123456789abcdef"]
TIMEOUT = 60


def _items(store: ss.SessionStore) -> list[dict[str, Any]]:
    return [to_python(i) or {} for i in scan(store.client, store.table_name)]


def _run(main: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(TIMEOUT):
            return await main()

    return asyncio.run(bounded())


# ---------------------------------------------------------------------------- the core


def test_an_ask_takes_its_first_answer_once(store: ss.SessionStore, active: ss.Session) -> None:
    db, sid = store.table, active.session_id
    q1, _ = asks.ask(db, sid, "t-1", "sampling/createMessage", 60_000)
    assert q1 == "1767268800000-t-1"  # the time first: asks sort in the order they were made
    assert asks.poll(db, sid, q1, "alice") is None

    first = json.dumps({"result": {"text": "Paris"}})
    assert asks.answer(db, sid, q1, first) is asks.Delivery.TAKEN
    # The same POST again (a client re-sending it) is taken as it was; another answer is not.
    assert asks.answer(db, sid, q1, first) is asks.Delivery.TAKEN
    later = json.dumps({"result": {"text": "Lyon"}})
    assert asks.answer(db, sid, q1, later) is asks.Delivery.REPEATED
    assert asks.poll(db, sid, q1, "alice") == first
    # Read, the answer is removed; the ask stays answered.
    asks.settle(db, sid, q1)
    assert asks.poll(db, sid, q1, "alice") is None
    assert asks.answer(db, sid, q1, later) is asks.Delivery.REPEATED
    # An answer to nothing is refused, and writes nothing.
    assert asks.answer(db, sid, "nobody-asked", first) is asks.Delivery.UNKNOWN
    (ask,) = [i for i in _items(store) if i["sk"].startswith(asks.ASK_PREFIX)]
    assert ask["sk"] == f"ask#{q1}" and "answer" not in ask and "answeredAt" in ask


def test_an_answer_after_the_deadline_is_refused(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock
) -> None:
    db, sid = store.table, active.session_id
    q1, deadline = asks.ask(db, sid, "t-1", "elicitation/create", 5_000)
    assert deadline == clock.now_ms() + 5_000
    clock.advance(seconds=5)
    assert asks.answer(db, sid, q1, '{"result":{}}') is asks.Delivery.UNKNOWN
    assert asks.poll(db, sid, q1, "alice") is None


def test_a_poll_ends_when_the_session_does(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock
) -> None:
    db, sid = store.table, active.session_id
    q1, _ = asks.ask(db, sid, "t-1", "sampling/createMessage", 60_000)
    with pytest.raises(SessionNotFound):
        asks.poll(db, sid, q1, "bob")  # another principal's session looks missing
    store.begin_close(sid, owner="alice")
    with pytest.raises(SessionNotActive):
        asks.poll(db, sid, q1, "alice")
    other = store.create_session(owner="alice", ttl_seconds=60)
    store.activate(other.session_id, owner="alice")
    q2, _ = asks.ask(db, other.session_id, "t-2", "sampling/createMessage", 600_000)
    clock.advance(seconds=61)
    with pytest.raises(SessionExpired):
        asks.poll(db, other.session_id, q2, "alice")


def test_a_poll_is_one_query_of_small_items_and_reads_beside_the_session_are_unchanged(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock, requests: RequestLog
) -> None:
    db, sid = store.table, active.session_id
    store.append_context(sid, [{"role": "user", "text": "hi"}], owner="alice")
    # An earlier ask, answered with 300 KB, read and settled; then the one polled.
    earlier, _ = asks.ask(db, sid, "t-1", "sampling/createMessage", 60_000)
    big = json.dumps({"result": {"text": "x" * 300_000}})
    assert asks.answer(db, sid, earlier, big) is asks.Delivery.TAKEN
    clock.advance(ms=1)
    q2, _ = asks.ask(db, sid, "t-2", "sampling/createMessage", 60_000)
    asks.settle(db, sid, earlier)
    requests.reset()
    assert asks.poll(db, sid, q2, "alice") is None
    assert requests.operations == ["Query"]
    # What that Query read: the polled ask and the metadata item, 1 read unit.
    polled = list(db.query(schema.pk(sid), f"ask#{q2}", schema.META_SK))
    assert [i["sk"] for i in polled] == [f"ask#{q2}", schema.META_SK]
    raw = [to_wire_item(i) for i in polled]
    assert sizing.query_read_units(sizing.item_size(i) for i in raw) == 1
    # The asks sort before the metadata item: the session's own Queries never see them.
    assert list(store.context(sid, owner="alice")) == [{"role": "user", "text": "hi"}]
    loaded = store.load(sid, owner="alice")
    assert loaded.session.message_count == 1 and loaded.tool_calls == []
    assert f"{asks.ASK_PREFIX}~" < schema.META_SK


def test_an_answer_past_the_bound_is_refused_whole(
    store: ss.SessionStore, active: ss.Session
) -> None:
    db, sid = store.table, active.session_id
    q1, _ = asks.ask(db, sid, "t-1", "sampling/createMessage", 60_000)
    huge = json.dumps({"result": {"text": "x" * asks.ANSWER_MAX_BYTES}})
    with pytest.raises(ItemTooLarge):
        asks.answer(db, sid, q1, huge)
    assert asks.poll(db, sid, q1, "alice") is None


# ---------------------------------------------------------------------------- over HTTP


class Asked:
    """What the client was asked, and how it answers."""

    def __init__(self, delay: float = 0.0, before: Callable[[], Awaitable[None]] | None = None):
        self.delay = delay
        self.before = before
        self.methods: list[str] = []
        #: (instance, ask | answer | settle, ask key) of every write to an ask item, in order.
        self.writes: list[tuple[int, str, str]] = []

    async def sample(self, context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        self.methods.append("sampling")
        await self._pause()
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="Paris"), model="test"
        )

    async def elicit(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.methods.append("elicitation")
        await self._pause()
        return ElicitResult(action="accept", content={"username": "ann", "email": "a@b.example"})

    async def _pause(self) -> None:
        if self.before is not None:
            await self.before()
        await asyncio.sleep(self.delay)


def _watch_asks(store: ss.SessionStore, instance: int, writes: list[tuple[int, str, str]]) -> None:
    def seen(params: dict[str, Any], event_name: str, **_: Any) -> None:
        key = params.get("Key") or params.get("Item") or {}
        sk = key.get("sk", {}).get("S", "")
        if sk.startswith(asks.ASK_PREFIX):
            update = params.get("UpdateExpression", "")
            what = "ask" if not update else ("answer" if update.startswith("SET") else "settle")
            writes.append((instance, what, sk))

    for operation in ("PutItem", "UpdateItem"):
        store.client.meta.events.register(f"provide-client-params.dynamodb.{operation}", seen)


@asynccontextmanager
async def two_instances(
    engine: LocalDynamoDB, table: str, asked: Asked, **app: Any
) -> AsyncIterator[tuple[RoundRobinProxy, Client, list[ss.SessionStore]]]:
    stores: list[ss.SessionStore] = []

    def instance() -> RunningServer:
        store = ss.SessionStore(
            ss.connect(engine.endpoint_url), table, retry=RetryPolicy(sleep=lambda _s: None)
        )
        _watch_asks(store, len(stores), asked.writes)
        stores.append(store)
        server = create_server(store, state_keys=KEYS)
        fx.add_conformance_fixtures(server)
        return RunningServer(create_app(server, **app))

    async with instance() as a, instance() as b:
        proxy = RoundRobinProxy([a.url.removesuffix("/mcp"), b.url.removesuffix("/mcp")])
        try:
            async with (
                RunningServer(proxy) as lb,
                Client(
                    lb.url,
                    mode="legacy",
                    sampling_callback=asked.sample,
                    elicitation_callback=asked.elicit,
                ) as client,
            ):
                yield proxy, client, stores
        finally:
            await proxy.aclose()


def _text(result: Any) -> str:
    return str(result.content[0].text)


def test_a_tool_asks_the_client_and_the_answer_reaches_it_through_the_other_instance(
    engine: LocalDynamoDB, table: str
) -> None:
    asked = Asked()

    async def main() -> None:
        async with two_instances(engine, table, asked) as (_, client, stores):
            sampled = await client.call_tool("test_sampling", {"prompt": "Capital of France?"})
            elicited = await client.call_tool("test_elicitation", {"message": "Who are you?"})
            assert not sampled.is_error and _text(sampled) == "LLM response: Paris"
            assert not elicited.is_error, _text(elicited)
            assert '"username": "ann"' in _text(elicited)
            items = _items(stores[0])

        # Each ask was opened by one instance and answered by the other.
        by = {
            what: {sk: i for i, w, sk in asked.writes if w == what}
            for what in ("ask", "answer", "settle")
        }
        assert (
            len(by["ask"]) == 2 and by["ask"].keys() == by["answer"].keys() == by["settle"].keys()
        )
        # ... answered by the other instance, and settled by the one that asked, once it read it.
        assert all(by["answer"][sk] != by["ask"][sk] == by["settle"][sk] for sk in by["ask"])

        asked_items = [i for i in items if i["sk"].startswith(asks.ASK_PREFIX)]
        assert sorted(i["method"] for i in asked_items) == [
            "elicitation/create",
            "sampling/createMessage",
        ]
        assert all("answeredAt" in i and "answer" not in i for i in asked_items)
        # Each call ran once and was recorded once.
        calls = [i for i in items if i["sk"].startswith(schema.TOOL_PREFIX)]
        assert sorted(i["toolName"] for i in calls) == ["test_elicitation", "test_sampling"]

    _run(main)
    assert asked.methods == ["sampling", "elicitation"]


def test_the_wait_is_bounded_and_a_late_answer_is_dropped(
    engine: LocalDynamoDB, table: str
) -> None:
    asked = Asked(delay=POLLS[0] + 2.0)

    async def main() -> None:
        async with two_instances(engine, table, asked, answer_wait_seconds=1) as (_, client, _s):
            result = await client.call_tool("test_sampling", {"prompt": "Slow?"})
            assert result.is_error
            assert "no answer from the client within 1 s" in _text(result)

    _run(main)
    assert asked.methods == ["sampling"]


def test_a_session_closed_while_its_tool_waits_ends_the_wait_with_the_reason(
    engine: LocalDynamoDB, table: str
) -> None:
    holder: dict[str, Any] = {}

    async def close_the_session() -> None:
        store: ss.SessionStore = holder["stores"][0]
        (meta,) = [i for i in _items(store) if i["sk"] == schema.META_SK]
        await asyncio.to_thread(store.begin_close, meta["sessionId"])

    asked = Asked(before=close_the_session)

    async def main() -> None:
        async with two_instances(engine, table, asked) as (_, client, stores):
            holder["stores"] = stores
            result = await client.call_tool("test_sampling", {"prompt": "Anyone?"})
            assert result.is_error
            assert "the session ended while the client was being asked" in _text(result)
            assert "closing, not active" in _text(result)

    _run(main)


def test_an_answer_post_for_nothing_gets_202_and_writes_nothing(
    engine: LocalDynamoDB, table: str
) -> None:
    async def main() -> None:
        async with two_instances(engine, table, Asked()) as (proxy, client, stores):
            await client.list_tools()  # the session is open
            (meta,) = [i for i in _items(stores[0]) if i["sk"] == schema.META_SK]
            headers = {
                "mcp-session-id": meta["sessionId"],
                "mcp-protocol-version": "2025-11-25",
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
            }
            body = {"jsonrpc": "2.0", "id": f"{ASK_ID_PREFIX}0-t-9999", "result": {}}
            url = f"{proxy.backends[0]}/mcp"
            async with httpx2.AsyncClient(timeout=10) as http:
                answered = await http.post(url, json=body, headers=headers)
                unknown_session = await http.post(
                    url, json=body, headers={**headers, "mcp-session-id": "no-such-session"}
                )
            assert answered.status_code == 202
            assert unknown_session.status_code == 404
            assert not [i for i in _items(stores[0]) if i["sk"].startswith(asks.ASK_PREFIX)]

    _run(main)


@pytest.mark.parametrize("seconds", [0, 300, float("nan")])
def test_a_wait_that_is_not_shorter_than_the_lease_is_refused_when_the_app_is_built(
    store: ss.SessionStore, seconds: float
) -> None:
    server = create_server(store, state_keys=KEYS)  # lease_seconds=300
    with pytest.raises(ss.InvalidInput, match="wait_seconds"):
        create_app(server, answer_wait_seconds=seconds)


# ---------------------------------------------------------------------------- raw HTTP: the edges

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"sampling": {}, "elicitation": {}},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _call(name: str, arguments: dict[str, Any], request_id: int = 2) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def _event(lines: AsyncIterator[str]) -> dict[str, Any]:
    async for line in lines:
        if line.startswith("data: "):
            return dict(json.loads(line.removeprefix("data: ")))
    raise AssertionError("the stream ended without an event")


class Confirmation(BaseModel):
    ok: bool


def _impatient_tool(server: Any) -> None:
    @server.tool()
    async def impatient(ctx: Context) -> str:
        """Asks the client's model, and gives up on it after 0.3 s."""
        message = SamplingMessage(role="user", content=TextContent(type="text", text="Quick?"))
        asking = ctx.session.create_message(
            [message], max_tokens=10, related_request_id=ctx.request_id
        )
        try:
            await asyncio.wait_for(asking, 0.3)
        except TimeoutError:
            return "gave up"
        return "answered"


def _confirm_tool(server: Any, runs: list[str]) -> None:
    @server.tool()
    async def confirm(order: str, ctx: Context, idempotency_key: IdempotencyKey = None) -> bool:
        """Asks the user to confirm an order (keyed: a retry never runs it again)."""
        runs.append(order)
        answer = await ctx.elicit(f"Charge order {order}?", Confirmation)
        return answer.action == "accept" and answer.data is not None and answer.data.ok


@asynccontextmanager
async def one_instance(
    store: ss.SessionStore, runs: list[str] | None = None
) -> AsyncIterator[tuple[str, httpx2.AsyncClient, dict[str, str]]]:
    server = create_server(store, state_keys=KEYS)
    fx.add_conformance_fixtures(server)
    if runs is not None:
        _confirm_tool(server, runs)
    _impatient_tool(server)
    async with (
        RunningServer(create_app(server)) as running,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        opened = await http.post(running.url, json=INITIALIZE, headers=HEADERS)
        session = {
            **HEADERS,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
        yield running.url, http, session


def test_a_client_that_disconnects_mid_call_ends_that_call_alone(client: Any, table: str) -> None:
    store = ss.SessionStore(client, table)
    store.create_table()

    async def main() -> None:
        async with one_instance(store) as (url, http, session):
            for n in range(3):
                # The tool logs, sleeps and logs again: the client leaves after the first log.
                call = _call("test_tool_with_logging", {}, request_id=10 + n)
                async with http.stream("POST", url, json=call, headers=session) as stream:
                    await _event(stream.aiter_lines())
                await asyncio.sleep(0.3)  # the tool's next write finds the stream gone
                listed = await http.post(url, json=_call("test_simple_text", {}), headers=session)
                assert listed.status_code == 200, listed.text

    _run(main)


def test_an_answer_post_is_checked_as_the_sdk_checks_a_post(client: Any, table: str) -> None:
    store = ss.SessionStore(client, table)
    store.create_table()

    async def main() -> None:
        async with one_instance(store) as (url, http, session):
            answer = {"jsonrpc": "2.0", "id": f"{ASK_ID_PREFIX}0-t-1", "result": {}}
            foreign = await http.post(url, json=answer, headers={**session, "host": "evil.example"})
            text_only = await http.post(
                url, json=answer, headers={**session, "accept": "text/plain"}
            )
            nested = b'{"id": "ask-0-t-1", "result": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
            deep = await http.post(url, content=nested, headers=session)
            assert foreign.status_code == 421
            assert text_only.status_code == 406
            assert 400 <= deep.status_code < 500, deep.text

    _run(main)


def test_an_answer_too_large_to_keep_reaches_the_tool_as_an_error(client: Any, table: str) -> None:
    store = ss.SessionStore(client, table)
    store.create_table()

    async def main() -> None:
        async with one_instance(store) as (url, http, session):
            call = _call("test_sampling", {"prompt": "Say a lot"})
            async with http.stream("POST", url, json=call, headers=session) as stream:
                lines = stream.aiter_lines()
                asked = await _event(lines)
                content = {"type": "text", "text": "x" * (asks.ANSWER_MAX_BYTES + 1)}
                result = {"role": "assistant", "content": content, "model": "m"}
                answer = {"jsonrpc": "2.0", "id": asked["id"], "result": result}
                posted = await http.post(url, json=answer, headers=session)
                done = await _event(lines)
            assert posted.status_code == 202
            assert done["result"]["isError"] is True
            assert "too large to keep" in done["result"]["content"][0]["text"]

    _run(main)


def test_a_keyed_call_re_sent_while_its_tool_waits_is_in_progress_and_runs_once(
    client: Any, table: str
) -> None:
    store = ss.SessionStore(client, table)
    store.create_table()
    runs: list[str] = []

    async def main() -> None:
        async with one_instance(store, runs) as (url, http, session):
            call = _call("confirm", {"order": "o-1", "idempotency_key": "confirm-o-1"})
            async with http.stream("POST", url, json=call, headers=session) as stream:
                lines = stream.aiter_lines()
                asked = await _event(lines)
                again = await http.post(url, json={**call, "id": 3}, headers=session)
                retried = await _event(again.aiter_lines())
                answer = {
                    "jsonrpc": "2.0",
                    "id": asked["id"],
                    "result": {"action": "accept", "content": {"ok": True}},
                }
                await http.post(url, json=answer, headers=session)
                done = await _event(lines)
            after = await http.post(url, json={**call, "id": 4}, headers=session)
            replayed = await _event(after.aiter_lines())
            assert retried["error"]["code"] == protocol.TOOL_CALL_IN_PROGRESS
            assert done["result"]["structuredContent"] == {"result": True}
            assert replayed["result"]["structuredContent"] == {"result": True}

    _run(main)
    assert runs == ["o-1"]


def test_an_ask_the_tool_gives_up_on_is_cancelled_by_the_id_the_client_knows(
    client: Any, table: str
) -> None:
    store = ss.SessionStore(client, table)
    store.create_table()

    async def main() -> list[dict[str, Any]]:
        async with one_instance(store) as (url, http, session):
            call = _call("impatient", {})
            async with http.stream("POST", url, json=call, headers=session) as stream:
                lines = stream.aiter_lines()
                return [await _event(lines), await _event(lines), await _event(lines)]

    asked, cancelled, done = _run(main)
    assert asked["method"] == "sampling/createMessage"
    assert cancelled["method"] == "notifications/cancelled"
    assert cancelled["params"]["requestId"] == asked["id"]  # the ask id, not the SDK's own
    assert done["result"]["structuredContent"] == {"result": "gave up"}


# ---------------------------------------------------------------------------- the claim's lease


class Survey:
    """A keyed tool that asks the client three questions, and the renewals of its lease."""

    QUESTIONS = 3

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.renewals: list[int] = []  # the instance that sent each

    def tools(self, server: Any) -> None:
        @server.tool()
        async def survey(ctx: Context, idempotency_key: IdempotencyKey = None) -> int:
            """Three questions, one after the other; the number answered yes."""
            self.runs.append(str(idempotency_key))
            yes = 0
            for n in range(self.QUESTIONS):
                answer = await ctx.elicit(f"Question {n + 1}?", Confirmation)
                yes += answer.action == "accept" and answer.data is not None and answer.data.ok
            return yes

    def watch(self, store: ss.SessionStore, instance: int) -> None:
        def seen(params: dict[str, Any], **_: Any) -> None:
            # A renewal sets the lease alone; a completion removes it, a later round sets more.
            names = params.get("ExpressionAttributeNames", {})
            update = params.get("UpdateExpression", "")
            if "leaseUntil" in names.values() and "," not in update and "REMOVE" not in update:
                self.renewals.append(instance)

        store.client.meta.events.register("provide-client-params.dynamodb.UpdateItem", seen)


def test_a_tool_that_asks_past_its_lease_keeps_it_and_a_retry_is_told_in_progress(
    engine: LocalDynamoDB, table: str
) -> None:
    """Each wait is shorter than the lease, their sum is not: the lease is renewed while the
    tool waits, so a retry on the other instance is "in progress", never "outcome unknown";
    the tool runs once and a later retry is replayed. Time is the injected clock's: the first
    two answers come 6 s after their question, past half the 10 s lease."""
    clock = ss.ManualClock("2026-01-01T12:00:00Z")
    survey = Survey()

    def instance(n: int) -> RunningServer:
        store = ss.SessionStore(
            ss.connect(engine.endpoint_url),
            table,
            clock=clock,
            retry=RetryPolicy(sleep=lambda _s: None),
        )
        survey.watch(store, n)
        server = create_server(store, state_keys=KEYS, lease_seconds=10)
        survey.tools(server)
        return RunningServer(create_app(server, answer_wait_seconds=8))

    async def main() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with (
            instance(0) as a,
            instance(1) as b,
            httpx2.AsyncClient(timeout=10) as http,
        ):
            opened = await http.post(a.url, json=INITIALIZE, headers=HEADERS)
            session = {
                **HEADERS,
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            }
            call = _call("survey", {"idempotency_key": "survey-1"})
            async with http.stream("POST", a.url, json=call, headers=session) as stream:
                lines = stream.aiter_lines()
                for n in range(Survey.QUESTIONS):
                    asked = await _event(lines)
                    assert asked["method"] == "elicitation/create"
                    if n < Survey.QUESTIONS - 1:
                        clock.advance(seconds=6)  # the client takes its time
                    else:  # 12 s since the claim: past its first lease
                        again = await http.post(b.url, json={**call, "id": 3}, headers=session)
                        retried = await _event(again.aiter_lines())
                    answer = {
                        "jsonrpc": "2.0",
                        "id": asked["id"],
                        "result": {"action": "accept", "content": {"ok": True}},
                    }
                    posted = await http.post(b.url, json=answer, headers=session)
                    assert posted.status_code == 202
                done = await _event(lines)
            after = await http.post(b.url, json={**call, "id": 4}, headers=session)
            return retried, done, await _event(after.aiter_lines())

    retried, done, replayed = _run(main)
    assert retried.get("error", {}).get("code") == protocol.TOOL_CALL_IN_PROGRESS, retried
    assert done["result"]["structuredContent"] == {"result": 3}
    assert replayed["result"]["structuredContent"] == {"result": 3}
    assert replayed["result"]["_meta"][protocol.REPLAYED_KEY] is True
    assert survey.runs == ["survey-1"]
    # The cost: one conditional UpdateItem per half lease spent asking (here one per wait that
    # passed half the lease), sent by the instance whose tool waits.
    assert survey.renewals == [0, 0]
