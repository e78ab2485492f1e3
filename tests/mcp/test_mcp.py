"""sessionstore.mcp over real HTTP on loopback, with the SDK's own client.

Two server instances (each its own boto3 client, store and ``MCPServer``, like two processes)
share one table on the embedded engine; clients alternate between them. Tools count their
executions, so "executed once" is counted, not inferred.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

import sessionstore as ss
from sessionstore import claims
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import (
    RunningServer,
    SessionCalls,
    call_meta,
    close_session,
    create_app,
    create_server,
    current_session,
    open_session,
    protocol,
)
from sessionstore.mcp.__main__ import main as mcp_main
from sessionstore.mcp.protocol import SessionHandle
from sessionstore.retry import RetryPolicy
from sessionstore.testing import Fault, FaultInjector, RequestLog
from tests.core.test_policy import Calls, _actions, _policy

KEYS = ["test-request-state-key-0123456789abcdef"]
TIMEOUT = 30


def _run(main: Callable[[], Awaitable[Any]]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(TIMEOUT):
            return await main()

    return asyncio.run(bounded())


class Tokens:
    """A bearer-token verifier with a fixed table: token -> client id."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table

    async def verify_token(self, token: str) -> AccessToken | None:
        client_id = self.table.get(token)
        return (
            None if client_id is None else AccessToken(token=token, client_id=client_id, scopes=[])
        )


@dataclass
class Cluster:
    """Instances of one server on one table; ``executions`` counts tool runs across all."""

    engine: LocalDynamoDB
    table: str
    clock: ss.ManualClock
    ids: ss.CounterIds
    auth: bool = False
    executions: Counter[str] = field(default_factory=Counter)
    release: asyncio.Event | None = None
    stores: list[ss.SessionStore] = field(default_factory=list)

    def server(self) -> tuple[MCPServer, ss.SessionStore]:
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
            kwargs["token_verifier"] = Tokens({"alice-token": "alice", "bob-token": "bob"})
            kwargs["auth"] = AuthSettings(
                issuer_url="http://127.0.0.1/issuer",  # type: ignore[arg-type]
                resource_server_url=None,
            )
        server = create_server(store, state_keys=KEYS, lease_seconds=60, **kwargs)
        cluster = self

        @server.tool()
        async def echo(text: str, session_id: SessionHandle = None) -> str:
            """Counts its executions; waits for ``release`` when one is set."""
            cluster.executions[text] += 1
            if cluster.release is not None:
                await asyncio.wait_for(cluster.release.wait(), TIMEOUT)
            await current_session().append({"role": "echo", "text": text})
            return text

        @server.tool()
        def fail(reason: str) -> str:
            cluster.executions[f"fail:{reason}"] += 1
            raise ToolError(reason)

        return server, store

    def running(self) -> RunningServer:
        return RunningServer(create_app(self.server()[0]))


@pytest.fixture
def cluster(engine: LocalDynamoDB, table: str) -> Cluster:
    return Cluster(engine, table, ss.ManualClock("2026-01-01T12:00:00Z"), ss.CounterIds())


def _client(url: str, *, mode: str = "auto", token: str | None = None) -> Client:
    if token is None:
        return Client(url, mode=mode)
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def _replayed(result: Any) -> bool:
    return (result.meta or {}).get(protocol.REPLAYED_KEY) is True


def _text(result: Any) -> str:
    return str(result.content[0].text)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_one_session_across_two_instances_complete_and_ordered(cluster: Cluster, mode: str) -> None:
    async def main() -> None:
        async with (
            cluster.running() as a,
            cluster.running() as b,
            _client(a.url, mode=mode) as ca,
            _client(b.url, mode=mode) as cb,
        ):
            assert (ca.protocol_version == "2026-07-28") is (mode == "auto")
            opened = await open_session(ca)
            sid = opened.session_id
            for i, client in zip(range(6), itertools.cycle([ca, cb]), strict=False):
                result = await SessionCalls(client, sid).call(
                    "echo", {"text": f"m{i}"}, tool_call_id=f"c{i}"
                )
                assert _text(result) == f"m{i}"
                cluster.clock.advance(ms=1)
            noted = await SessionCalls(cb, sid).call("note", {"text": "from b"})
            assert noted.structured_content == {"position": 7, "version": 9}
            cluster.clock.advance(ms=1)  # records of one millisecond sort by call id
            listed = await SessionCalls(ca, sid).call("notes", {})
            assert listed.structured_content == {"result": ["from b"]}
            closed = await close_session(cb, sid)
            assert closed.status == "closed"
        store = cluster.stores[0]
        session, context, history = store.load(sid)
        assert [r.tool_call_id for r in history[:6]] == [f"c{i}" for i in range(6)]
        assert [r.tool_name for r in history] == ["echo"] * 6 + ["note", "notes"]
        assert [m["text"] for m in context] == [*(f"m{i}" for i in range(6)), "from b"]
        assert list(store.context(sid)) == list(context) and session.message_count == 7
        assert session.status is ss.Status.CLOSED
        assert cluster.executions == Counter({f"m{i}": 1 for i in range(6)})

    _run(main)


def test_an_instance_restarted_mid_session_loses_nothing(cluster: Cluster) -> None:
    async def main() -> None:
        a = await cluster.running().start()
        async with cluster.running() as b:
            async with _client(a.url) as client:
                sid = (await open_session(client)).session_id
                await SessionCalls(client, sid).call("echo", {"text": "before"}, tool_call_id="1")
            await a.stop()  # the instance goes away with whatever it had in memory
            async with _client(b.url) as client:
                await SessionCalls(client, sid).call("echo", {"text": "during"}, tool_call_id="2")
            async with cluster.running() as a2, _client(a2.url) as client:
                calls = SessionCalls(client, sid)
                await calls.call("echo", {"text": "after"}, tool_call_id="3")
                again = await calls.call("echo", {"text": "before"}, tool_call_id="1")
                assert _text(again) == "before" and _replayed(again)
        _session, context, history = cluster.stores[0].load(sid)
        assert [r.tool_call_id for r in history] == ["1", "2", "3"]
        assert [m["text"] for m in context] == ["before", "during", "after"]
        assert cluster.executions == Counter({"before": 1, "during": 1, "after": 1})

    _run(main)


def test_the_same_call_twice_and_concurrently_from_two_clients_executes_once(
    cluster: Cluster,
) -> None:
    async def main() -> None:
        cluster.release = asyncio.Event()
        async with (
            cluster.running() as a,
            cluster.running() as b,
            _client(a.url) as ca,
            _client(b.url, mode="legacy") as cb,
        ):
            sid = (await open_session(ca)).session_id
            first = asyncio.create_task(
                SessionCalls(ca, sid).call("echo", {"text": "once"}, tool_call_id="dup")
            )
            for _ in range(500):  # until the first delivery is running the tool
                if cluster.executions["once"]:
                    break
                await asyncio.sleep(0.01)
            with pytest.raises(MCPError) as busy:
                await SessionCalls(cb, sid).call("echo", {"text": "once"}, tool_call_id="dup")
            assert busy.value.code == protocol.TOOL_CALL_IN_PROGRESS
            assert busy.value.data["reason"] == "in_progress"
            cluster.release.set()
            assert _text(await first) == "once"
            for client in (ca, cb, ca):
                again = await SessionCalls(client, sid).call(
                    "echo", {"text": "once"}, tool_call_id="dup"
                )
                assert _text(again) == "once" and _replayed(again)
            with pytest.raises(MCPError) as reused:
                await SessionCalls(cb, sid).call("echo", {"text": "other"}, tool_call_id="dup")
            assert reused.value.code == protocol.TOOL_CALL_ID_REUSED
        assert cluster.executions == Counter({"once": 1})
        loaded = cluster.stores[0].load(sid)
        assert [r.tool_call_id for r in loaded.tool_calls] == ["dup"]
        assert list(loaded.context) == [{"role": "echo", "text": "once"}]  # the tool ran once

    _run(main)


def test_tool_errors_are_recorded_as_errors_and_replayed(cluster: Cluster) -> None:
    async def main() -> None:
        async with cluster.running() as a, _client(a.url) as client:
            calls = SessionCalls(client, (await open_session(client)).session_id)
            for _ in range(2):
                result = await calls.call("fail", {"reason": "no"}, tool_call_id="f1")
                assert result.is_error and _text(result) == "Error executing tool fail: no"
            bad = await calls.call("calculate", {"expression": "1/0"}, tool_call_id="f2")
            assert bad.is_error and _text(bad).endswith("division by zero")
            good = await calls.call("calculate", {"expression": "6 * (3 + 4)"}, tool_call_id="k")
            assert good.structured_content == {"result": 42}
            (record_f1, record_f2, record_k) = cluster.stores[0].load(calls.session_id).tool_calls
        assert record_f1.output["callToolResult"]["isError"] is True
        assert record_f2.output["callToolResult"]["isError"] is True
        assert record_k.output["callToolResult"]["structuredContent"] == {"result": 42}
        assert record_k.duration_ms == 0  # the injected clock did not move
        assert cluster.executions == Counter({"fail:no": 1})

    _run(main)


def test_refusals_are_clear_mcp_errors(cluster: Cluster) -> None:
    async def main() -> None:
        async with cluster.running() as a, _client(a.url) as client:
            with pytest.raises(MCPError) as missing:
                await client.call_tool("echo", {"text": "x"})
            assert missing.value.code == protocol.SESSION_REQUIRED
            with pytest.raises(MCPError) as unknown:
                await SessionCalls(client, "no-such-session").call("echo", {"text": "x"})
            assert unknown.value.code == protocol.SESSION_NOT_FOUND
            sid = (await open_session(client, ttl_seconds=60)).session_id
            # Without a key every delivery is a call of its own: run and recorded each time.
            for _ in range(2):
                await client.call_tool("echo", {"text": "unkeyed"}, meta=call_meta(sid))  # type: ignore[arg-type]
            with pytest.raises(MCPError) as bad_ttl:
                await open_session(client, ttl_seconds=10**9)
            assert bad_ttl.value.code == -32602
            await SessionCalls(client, sid).call("echo", {"text": "kept"}, tool_call_id="k1")
            await close_session(client, sid)
            assert (await close_session(client, sid)).status == "closed"  # idempotent
            with pytest.raises(MCPError) as closed:
                await SessionCalls(client, sid).call("echo", {"text": "x"}, tool_call_id="k2")
            assert closed.value.code == protocol.SESSION_NOT_ACTIVE
            assert closed.value.data["status"] == "closed"
            # A finished call's result outlives the session's close.
            kept = await SessionCalls(client, sid).call("echo", {"text": "kept"}, tool_call_id="k1")
            assert _text(kept) == "kept"
            short = (await open_session(client, ttl_seconds=5)).session_id
            cluster.clock.advance(seconds=10)
            with pytest.raises(MCPError) as expired:
                await SessionCalls(client, short).call("echo", {"text": "x"}, tool_call_id="e")
            assert expired.value.code == protocol.SESSION_EXPIRED
        assert cluster.executions == Counter({"kept": 1, "unkeyed": 2})
        history = cluster.stores[0].load(sid).tool_calls
        assert Counter(r.input["text"] for r in history) == Counter({"unkeyed": 2, "kept": 1})

    _run(main)


def test_a_crash_between_claim_and_record_is_never_run_again(cluster: Cluster) -> None:
    async def main() -> None:
        async with cluster.running() as a, _client(a.url) as client:
            sid = (await open_session(client)).session_id
            store = cluster.stores[0]
            # An instance claims and dies before recording: the claim is all that is left.
            ttl = store.get_session(sid).ttl
            outcome = claims.claim(
                store.table,
                sid,
                "lost",
                "echo",
                {"text": "x"},
                owner=None,
                ttl=ttl,
                lease_ms=60_000,
            )
            assert outcome.state is claims.State.CLAIMED
            calls = SessionCalls(client, sid)
            with pytest.raises(MCPError) as running:
                await calls.call("echo", {"text": "x"}, tool_call_id="lost")
            assert running.value.code == protocol.TOOL_CALL_IN_PROGRESS
            cluster.clock.advance(seconds=61)
            with pytest.raises(MCPError) as unknown:
                await calls.call("echo", {"text": "x"}, tool_call_id="lost")
            assert unknown.value.code == protocol.TOOL_CALL_OUTCOME_UNKNOWN
            assert unknown.value.data["reason"] == "outcome_unknown"
            # A claim never completed is not history (history keeps recorded calls only).
            assert store.load(sid).tool_calls == []
        assert cluster.executions == Counter()

    _run(main)


def test_a_foreign_principal_is_refused_like_a_missing_session(
    engine: LocalDynamoDB, table: str
) -> None:
    cluster = Cluster(engine, table, ss.ManualClock("2026-01-01T12:00:00Z"), ss.CounterIds(), True)

    async def main() -> None:
        async with cluster.running() as a:
            async with _client(a.url, token="alice-token") as alice:
                sid = (await open_session(alice)).session_id
                await SessionCalls(alice, sid).call("echo", {"text": "mine"}, tool_call_id="a1")
            async with _client(a.url, token="bob-token", mode="legacy") as bob:
                for call_id in ("a1", "b1"):  # a replay is refused too: no result leaks
                    with pytest.raises(MCPError) as foreign:
                        await SessionCalls(bob, sid).call(
                            "echo", {"text": "mine"}, tool_call_id=call_id
                        )
                    assert foreign.value.code == protocol.SESSION_NOT_FOUND
                    assert foreign.value.message == f"session {sid!r} not found"
                with pytest.raises(MCPError) as close:
                    await close_session(bob, sid)
                assert close.value.code == protocol.SESSION_NOT_FOUND
        session = cluster.stores[0].get_session(sid, owner="alice")
        assert session.owner == "alice" and session.status is ss.Status.ACTIVE
        assert cluster.executions == Counter({"mine": 1})

    _run(main)


def test_lost_responses_duplicate_nothing(cluster: Cluster) -> None:
    async def main() -> None:
        server, store = cluster.server()
        async with RunningServer(create_app(server)) as a, _client(a.url) as client:
            sid = (await open_session(client)).session_id
            calls = SessionCalls(client, sid)
            # Every write of the first calls loses its response once: the claim, the append
            # inside the tool, the record.
            lost = [Fault.LOST_RESPONSE, None] * 6
            with FaultInjector(store.client, script=lost, operations={"TransactWriteItems"}):
                for i in range(3):
                    await calls.call("echo", {"text": f"t{i}"}, tool_call_id=f"t{i}")
            with FaultInjector(store.client, script=[Fault.LOST_RESPONSE] * 2) as faults:
                await calls.call("echo", {"text": "t3"}, tool_call_id="t3")
            assert faults.injected[Fault.LOST_RESPONSE] == 2
            # The append inside the tool is two writes: its reservation, then its page.
            for i, operation in ((4, "UpdateItem"), (5, "PutItem")):
                with FaultInjector(
                    store.client, script=[Fault.LOST_RESPONSE], operations={operation}
                ) as faults:
                    await calls.call("echo", {"text": f"t{i}"}, tool_call_id=f"t{i}")
                assert faults.injected[Fault.LOST_RESPONSE] == 1
            for i in range(6):  # and the client retries each one
                again = await calls.call("echo", {"text": f"t{i}"}, tool_call_id=f"t{i}")
                assert _replayed(again)
        session, context, history = store.load(sid)
        assert [r.tool_call_id for r in history] == [f"t{i}" for i in range(6)]
        assert [m["text"] for m in context] == [f"t{i}" for i in range(6)]
        assert session.message_count == 6  # no seq reserved twice
        assert cluster.executions == Counter({f"t{i}": 1 for i in range(6)})

    _run(main)


def test_requests_per_tool_call(cluster: Cluster) -> None:
    """A fresh call on a warm instance: the claim (one transaction) and its completion (one
    UpdateItem); a repeat: the refused claim alone, no run; the first call an instance serves in
    a session reads the session once more."""

    async def main() -> list[Counter[str]]:
        server, store = cluster.server()
        async with RunningServer(create_app(server)) as a, _client(a.url) as client:
            calls = SessionCalls(client, (await open_session(client)).session_id)
            logs = []
            for call_id in ("warm", "x", "x"):
                with RequestLog(store.client) as log:
                    await calls.call("calculate", {"expression": "2+2"}, tool_call_id=call_id)
                logs.append(log.counts())
            cold_server, cold_store = cluster.server()
            async with RunningServer(create_app(cold_server)) as b, _client(b.url) as cold:
                with RequestLog(cold_store.client) as log:
                    await SessionCalls(cold, calls.session_id).call(
                        "calculate", {"expression": "3"}, tool_call_id="y"
                    )
                logs.append(log.counts())
        return logs

    first, fresh, repeat, cold = _run(main)
    # open taught this instance the session's ttl
    assert first == fresh == Counter({"TransactWriteItems": 1, "UpdateItem": 1})
    assert repeat == Counter({"TransactWriteItems": 1})  # answered from the refusal's ALL_OLD
    assert cold == Counter({"GetItem": 1, "TransactWriteItems": 1, "UpdateItem": 1})


def test_readme_client_snippet_runs_against_the_demo_server(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("<!-- mcp-client-snippet -->")[1].split("<!-- /mcp-client-snippet -->")[0]
    code = block.split("```python")[1].split("```")[0]
    assert "asyncio.run(main())" in code and "http://127.0.0.1:8765/mcp" in code

    async def main() -> None:
        server, _store = cluster.server()
        async with RunningServer(create_app(server)) as running:
            namespace: dict[str, Any] = {}
            exec(  # the README's own code, pointed at this server
                code.replace("asyncio.run(main())", "").replace(
                    "http://127.0.0.1:8765/mcp", running.url
                ),
                namespace,
            )
            await namespace["main"]()

    _run(main)
    printed = capsys.readouterr().out.splitlines()
    assert printed[:2] == ["{'result': 42}", "{'position': 1, 'version': 3}"]
    assert printed[2].startswith("{'result': ['buy milk', 'once']} {")
    assert f"'{protocol.REPLAYED_KEY}': True" in printed[2]


def test_the_demo_server_refuses_to_listen_beyond_loopback() -> None:
    with pytest.raises(SystemExit):
        mcp_main(["--host", "0.0.0.0"])
    with pytest.raises(ss.InvalidInput):
        RunningServer(object(), host="0.0.0.0")


def test_claims_send_only_what_the_least_privilege_policy_grants(
    client: Any, table: str, clock: ss.ManualClock
) -> None:
    store = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds())
    sid = store.create_session(owner="alice").session_id
    store.activate(sid, owner="alice")
    ttl = store.get_session(sid, owner="alice").ttl
    with Calls(client) as calls:
        first, busy = (
            claims.claim(store.table, sid, "c1", "t", {}, owner="alice", ttl=ttl, lease_ms=1000)
            for _ in range(2)
        )
        claims.complete(store.table, sid, "c1", first.claim, {}, None, 1)
        repeat = claims.claim(store.table, sid, "c1", "t", {}, owner="alice", ttl=ttl, lease_ms=1)
        with pytest.raises(ss.SessionNotFound):
            claims.claim(store.table, sid, "c2", "t", {}, owner="bob", ttl=ttl, lease_ms=1)
    assert (first.state, busy.state) == (
        claims.State.CLAIMED,
        claims.State.IN_PROGRESS,
    )
    assert repeat.state is claims.State.RECORDED
    granted = _actions(_policy("iam-policy.json"))
    assert {f"dynamodb:{a}" for a in calls.iam_actions()} <= granted
    assert all(key == f"session#{sid}" for _, key in calls.leading_keys())


def _claim_store(engine: LocalDynamoDB, table: str, clock: ss.ManualClock) -> ss.SessionStore:
    client = ss.connect(engine.endpoint_url, max_attempts=1)  # faults reach the attempt driver
    return ss.SessionStore(
        client, table, clock=clock, ids=ss.CounterIds(), retry=RetryPolicy(sleep=lambda _s: None)
    )


@pytest.mark.parametrize(
    "fault", [Fault.TRANSACTION_CONFLICT, Fault.TRANSACTION_THROTTLED, Fault.LOST_RESPONSE]
)
def test_a_claim_survives_contention_and_lost_responses(
    engine: LocalDynamoDB, table: str, clock: ss.ManualClock, fault: Fault
) -> None:
    store = _claim_store(engine, table, clock)
    sid = store.activate(store.create_session().session_id).session_id
    ttl = store.get_session(sid).ttl
    with FaultInjector(store.client, script=[fault], operations=["TransactWriteItems"]) as faults:
        outcome = claims.claim(store.table, sid, "c1", "t", {}, owner=None, ttl=ttl, lease_ms=1)
    assert faults.injected[fault] == 1
    assert outcome.state is claims.State.CLAIMED  # ours, also when the answer was lost
    again = claims.claim(store.table, sid, "c1", "t", {}, owner=None, ttl=ttl, lease_ms=1)
    assert again.state is not claims.State.CLAIMED  # exactly one claim exists


def test_a_completion_whose_response_is_lost_records_once(
    engine: LocalDynamoDB, table: str, clock: ss.ManualClock
) -> None:
    store = _claim_store(engine, table, clock)
    sid = store.activate(store.create_session().session_id).session_id
    ttl = store.get_session(sid).ttl
    mine = claims.claim(store.table, sid, "c1", "t", {"a": 1}, owner=None, ttl=ttl, lease_ms=1)
    with FaultInjector(store.client, script=[Fault.LOST_RESPONSE], operations=["UpdateItem"]) as f:
        claims.complete(store.table, sid, "c1", mine.claim, {"a": 1}, "out", 3)
    assert f.injected[Fault.LOST_RESPONSE] == 1  # the resend met its own recorded item
    (record,) = store.tool_calls(sid)
    assert (record.tool_call_id, record.input, record.output, record.duration_ms) == (
        "c1",
        {"a": 1},
        "out",
        3,
    )
    repeat = claims.claim(store.table, sid, "c1", "t", {"a": 1}, owner=None, ttl=ttl, lease_ms=1)
    assert repeat.state is claims.State.RECORDED and repeat.record == record


def test_a_completion_refused_when_the_claim_is_no_longer_ours(
    engine: LocalDynamoDB, table: str, clock: ss.ManualClock
) -> None:
    store = _claim_store(engine, table, clock)
    session = store.activate(store.create_session(ttl_seconds=60).session_id)
    sid, ttl = session.session_id, session.ttl
    old = claims.claim(store.table, sid, "c1", "t", {}, owner=None, ttl=ttl, lease_ms=1)
    # Its time up, the id is free again and another delivery (of a new incarnation) takes it.
    clock.advance(seconds=61)
    store.client.delete_item(
        TableName=table, Key={"pk": {"S": f"session#{sid}"}, "sk": {"S": "metadata"}}
    )
    again = store.activate(store.create_session(session_id=sid, ttl_seconds=60).session_id)
    new = claims.claim(store.table, sid, "c1", "t", {}, owner=None, ttl=again.ttl, lease_ms=1)
    assert new.state is claims.State.CLAIMED and new.claim.token != old.claim.token
    with pytest.raises(ss.SessionExpired):
        claims.complete(store.table, sid, "c1", old.claim, {}, "late", 1)
    # Gone altogether (TTL swept it): the session's time ran out while the tool ran.
    store.client.delete_item(
        TableName=table, Key={"pk": {"S": f"session#{sid}"}, "sk": {"S": "tool#c1"}}
    )
    with pytest.raises(ss.SessionExpired):
        claims.complete(store.table, sid, "c1", new.claim, {}, "late", 1)
    assert list(store.tool_calls(sid)) == []


def test_a_claim_contended_on_every_attempt_is_unavailable_and_writes_nothing(
    engine: LocalDynamoDB, table: str, clock: ss.ManualClock
) -> None:
    client = ss.connect(engine.endpoint_url, max_attempts=1)  # faults reach the attempt driver
    retry = RetryPolicy(max_attempts=3, sleep=lambda _s: None)
    store = ss.SessionStore(client, table, clock=clock, ids=ss.CounterIds(), retry=retry)
    sid = store.activate(store.create_session().session_id).session_id
    ttl = store.get_session(sid).ttl
    script = [Fault.TRANSACTION_CONFLICT] * 3
    with FaultInjector(store.client, script=script), pytest.raises(ss.Unavailable) as caught:
        claims.claim(store.table, sid, "c1", "t", {}, owner=None, ttl=ttl, lease_ms=1)
    assert not caught.value.maybe_applied
    outcome = claims.claim(store.table, sid, "c1", "t", {}, owner=None, ttl=ttl, lease_ms=1)
    assert outcome.state is claims.State.CLAIMED  # nothing was left behind


def test_a_claim_with_another_incarnations_ttl_takes_the_sessions(
    engine: LocalDynamoDB, table: str, clock: ss.ManualClock
) -> None:
    store = _claim_store(engine, table, clock)
    sid = store.activate(store.create_session().session_id).session_id
    ttl = store.get_session(sid).ttl
    with RequestLog(store.client) as log:
        outcome = claims.claim(
            store.table, sid, "c1", "t", {}, owner=None, ttl=ttl - 100, lease_ms=1
        )
    assert log.counts() == {"TransactWriteItems": 2}  # refused once, then the session's ttl
    assert outcome.claim.ttl == ttl
