"""The least-privilege IAM policy grants exactly the DynamoDB actions the store sends.

Every public method of ``SessionStore`` is exercised -- happy paths, conflicts, lost responses,
replays, refusals -- with a ``provide-client-params`` hook recording each call; then every other
path that sends a request (lagging clocks, MCP with asks and answers on both protocols, FastMCP,
the CLI) with every client recorded (``RequestLog.every_client``). The actions are
mapped to IAM actions (a transaction is authorized per action inside it) and compared with
``sessionstore/policy/iam-policy.json``; the table-admin actions of ``create_table`` with
``iam-admin-policy.json``. Then a small ``StringLike`` evaluator checks the ``LeadingKeys``
condition: every partition key a tenant's store touches matches its own pattern, and none of
another tenant's does.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterator
from fnmatch import fnmatchcase
from importlib import resources
from typing import Any

import pytest

import sessionstore as ss
from sessionstore.local import LocalDynamoDB
from sessionstore.retry import RetryPolicy
from sessionstore.testing import Fault, FaultInjector, RequestLog
from sessionstore.testing.hooks import Hooks
from sessionstore.testing.requests import iam_actions

ADMIN_ACTIONS = {"CreateTable", "DescribeTable", "DescribeTimeToLive", "UpdateTimeToLive"}
TAG = "aws:PrincipalTag/sessionstore-tenant"


def _policy(name: str) -> dict[str, Any]:
    text = (resources.files("sessionstore") / "policy" / name).read_text()
    return dict(json.loads(text))


def _actions(policy: dict[str, Any]) -> set[str]:
    actions: set[str] = set()
    for statement in policy["Statement"]:
        listed = statement["Action"]
        actions |= {listed} if isinstance(listed, str) else set(listed)
    return actions


class TenantIds(ss.RandomIds):
    """The id factory of sessionstore/policy/README.md: the tenant, a dot, 128 random bits."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant

    def session_id(self) -> str:
        return f"{self.tenant}.{super().session_id()}"


class Calls(Hooks):
    """Every API call a client makes: (operation, params), retries not repeated."""

    def __init__(self, client: Any) -> None:
        super().__init__(client)
        self.on("provide-client-params.dynamodb", self._hook)
        self.seen: list[tuple[str, dict[str, Any]]] = []

    def _hook(self, params: dict[str, Any], event_name: str, **_: Any) -> None:
        self.seen.append((event_name.rsplit(".", 1)[-1], json.loads(json.dumps(params))))

    def iam_actions(self) -> set[str]:
        return {action for op, params in self.seen for action in iam_actions(op, params)}

    def leading_keys(self) -> Iterator[tuple[str, str]]:
        """(operation, partition key value) for every item every data-plane call touches."""
        for operation, params in self.seen:
            if operation in ADMIN_ACTIONS:
                continue
            if operation == "TransactWriteItems":
                for item in params["TransactItems"]:
                    ((kind, action),) = item.items()
                    yield f"{operation}/{kind}", _pk(action)
            elif operation == "Query":
                names = params.get("ExpressionAttributeNames", {})
                for name, value in re.findall(r"(#\w+) = (:\w+)", params["KeyConditionExpression"]):
                    if names.get(name) == "pk":
                        yield operation, params["ExpressionAttributeValues"][value]["S"]
            else:
                yield operation, _pk(params)


def _pk(params: dict[str, Any]) -> str:
    return str((params.get("Key") or params["Item"])["pk"]["S"])


def _exercise(client: Any, table: str, tenant: str) -> None:
    """Every public method, through as many paths as the store has."""
    clock = ss.ManualClock("2026-01-01T12:00:00Z")
    store = ss.SessionStore(
        client, table, clock=clock, ids=TenantIds(tenant), retry=RetryPolicy(sleep=lambda _s: None)
    )
    store.create_table()
    sid = store.create_session(owner="alice").session_id
    store.get_session(sid, owner="alice")
    store.activate(sid, owner="alice")
    store.transition(sid, ss.Status.ACTIVE, owner="alice")  # no-op
    with pytest.raises(ss.InvalidTransition):
        store.transition(sid, ss.Status.INITIALIZING, owner="alice")
    store.append_context(sid, ["a"], owner="alice")
    with pytest.raises(ss.VersionConflict):
        store.append_context(sid, ["b"], owner="alice", expected_version=1)
    cold = ss.SessionStore(client, table, clock=clock, ids=TenantIds(tenant))
    cold.append_context(sid, ["c"], owner="alice")  # reads first
    cold.update_status(sid, ss.Status.ACTIVE, owner="alice")
    store.update_attributes(sid, {"title": "t"}, owner="alice")
    with pytest.raises(ss.VersionConflict):
        store.update_attributes(sid, {}, remove=["title"], owner="alice", expected_version=1)
    cold.update_attributes(sid, {"n": 1}, remove=["title"], owner="alice")
    store.record_tool_call(sid, "t1", "search", {"q": 1}, [1], 3, owner="alice")
    store.record_tool_call(sid, "t1", "search", {"q": 1}, [1], 3, owner="alice")  # replay
    with pytest.raises(ss.ToolCallConflict):
        store.record_tool_call(sid, "t1", "search", {"q": 2}, [1], 3, owner="alice")
    cold.record_tool_call(sid, "t2", "search", {}, None, 1, owner="alice")  # learns the ttl
    store.record_tool_call(sid, "t3", "search", {}, None, 1, owner="alice", ttl_seconds=60)
    store.touch(sid, owner="alice")
    with FaultInjector(client, script=[Fault.LOST_RESPONSE, Fault.THROTTLE]):
        store.append_context(sid, ["lost"], owner="alice")
    with FaultInjector(client, script=[Fault.LOST_RESPONSE], operations=["PutItem"]):
        store.append_context(sid, ["page lost"], owner="alice")  # the page's answer is lost
    with FaultInjector(client, script=[Fault.LOST_RESPONSE]):
        store.record_tool_call(sid, "t4", "search", {}, None, 1, owner="alice")
    list(store.tool_calls(sid, owner="alice"))
    reader = store.context(sid, owner="alice")  # one Query from the metadata item on
    assert list(reader) == ["a", "c", "lost", "page lost"]
    assert list(store.context(sid, owner="alice", after=1)) == ["lost", "page lost"]
    assert list(cold.context(sid, owner="alice", after=reader.position)) == []  # GetItem + Query
    with pytest.raises(ss.SessionNotFound):
        store.context(sid, owner="mallory")
    assert list(store.load(sid, owner="alice").context) == ["a", "c", "lost", "page lost"]
    store.begin_close(sid, owner="alice")
    store.update_status(sid, ss.Status.CLOSED, owner="alice")
    store.close(sid, owner="alice")  # no-op
    with pytest.raises(ss.SessionNotActive):
        store.append_context(sid, ["late"], owner="alice")
    with pytest.raises(ss.SessionNotFound):
        store.load(sid, owner="mallory")
    ended = store.create_session(owner="alice", attributes={"a": 1}).session_id
    store.begin_close(ended, owner="alice")
    store.close_and_expire(ended, owner="alice", expire_at=clock.now_ms() // 1000 + 60)
    short = store.create_session(owner="alice", ttl_seconds=5).session_id
    clock.advance(seconds=10)
    with pytest.raises(ss.SessionExpired):
        store.activate(short, owner="alice")
    with pytest.raises(ss.SessionAlreadyExists):
        store.create_session(short)


def test_every_public_method_is_exercised() -> None:
    public = {
        n for n, f in inspect.getmembers(ss.SessionStore) if not n.startswith("_") and callable(f)
    }
    source = inspect.getsource(_exercise)
    missing = {n for n in public if f".{n}(" not in source}
    assert not missing, f"add these to _exercise: {sorted(missing)}"


def test_policy_grants_the_actions_the_store_sends(client: Any) -> None:
    with Calls(client) as calls:
        _exercise(client, "mcp-sessions-policy", "acme")
    sent = calls.iam_actions()
    data_plane = {f"dynamodb:{a}" for a in sent - ADMIN_ACTIONS}
    admin = {f"dynamodb:{a}" for a in sent & ADMIN_ACTIONS}
    # Every path's actions, exactly: test_every_path_sends_only_what_the_policy_grants.
    assert data_plane <= _actions(_policy("iam-policy.json"))
    assert admin <= _actions(_policy("iam-admin-policy.json"))
    assert _actions(_policy("iam-admin-policy.json")) <= {f"dynamodb:{a}" for a in ADMIN_ACTIONS}


def _lagging_clocks(client: Any, table: str) -> None:
    """Writers whose clocks lag the session's idle deadline (two seconds are enough): each
    sends its write again without moving the deadline -- a tool call's guard as a
    ConditionCheck."""
    clock = ss.ManualClock("2026-01-01T12:00:00Z")
    ids = TenantIds("acme")
    punctual = ss.SessionStore(client, table, clock=clock, ids=ids)
    lagging = ss.SessionStore(client, table, clock=ss.ManualClock(clock.now_ms() - 2000), ids=ids)
    sid = punctual.create_session(owner="alice", idle_seconds=600).session_id
    punctual.activate(sid, owner="alice")
    lagging.record_tool_call(sid, "c1", "tool", {}, "out", 1, owner="alice")
    lagging.append_context(sid, ["late"], owner="alice")
    lagging.touch(sid, owner="alice")
    lagging.update_attributes(sid, {"k": 1}, owner="alice")


def _mcp(engine: LocalDynamoDB, table: str) -> None:
    """The MCP integration: sessions and tool calls over both protocols on two instances, and
    a tool that asks the client (sampling, elicitation), answered through the other one."""
    from sessionstore.mcp import SessionCalls, close_session, open_session
    from tests.mcp.test_back_channel import Asked, two_instances
    from tests.mcp.test_back_channel import _run as run
    from tests.mcp.test_mcp import Cluster, _client

    cluster = Cluster(engine, table, ss.ManualClock("2026-01-01T12:00:00Z"), ss.CounterIds())

    async def sessions() -> None:
        for mode in ("auto", "legacy"):
            async with (
                cluster.running() as a,
                cluster.running() as b,
                _client(a.url, mode=mode) as ca,
                _client(b.url, mode=mode) as cb,
            ):
                sid = (await open_session(ca)).session_id
                for i, c in enumerate((ca, cb, ca)):
                    await SessionCalls(c, sid).call("echo", {"text": "x"}, tool_call_id="c")
                    await SessionCalls(c, sid).call("echo", {"text": f"{i}"})
                await SessionCalls(cb, sid).call("fail", {"reason": "no"})
                await close_session(cb, sid)

    async def asking() -> None:
        async with two_instances(engine, table, Asked()) as (_, client, _stores):
            await client.call_tool("test_sampling", {"prompt": "Capital of France?"})
            await client.call_tool("test_elicitation", {"message": "Who are you?"})

    run(sessions)
    run(asking)


def _fastmcp(client: Any, table: str) -> None:
    """FastMCP's session state in the table: per session and per user, to the end."""
    import asyncio

    from fastmcp import Client
    from fastmcp.server.auth.providers.jwt import StaticTokenVerifier

    from sessionstore.aio import AsyncSessionStore
    from sessionstore.fastmcp import StoreSessionState
    from sessionstore.fastmcp.demo import create_server
    from sessionstore.mcp import RunningServer

    verifier = StaticTokenVerifier(tokens={"token-bob": {"client_id": "bob", "scopes": []}})
    state = StoreSessionState(AsyncSessionStore(ss.SessionStore(client, table)), idle_seconds=60)
    server = create_server(state, auth=verifier)

    async def main() -> None:
        async with (
            asyncio.timeout(60),
            RunningServer(server.http_app()) as running,
            Client(running.url, auth="token-bob") as c,
        ):
            sid = (await c.call_tool("create_session", {})).data
            for tool, args in (
                ("remember", {"key": "a", "value": 1}),
                ("recall", {"key": "a"}),
                ("recall_many", {"keys": ["a", "b"]}),
                ("forget", {"key": "a"}),
                ("remember", {"key": "b", "value": 2}),
                ("forget_all", {}),
            ):
                await c.call_tool(tool, {"session_id": sid, **args})
            await c.call_tool("remember_mine", {"key": "k", "value": "v"})
            await c.call_tool("recall_mine", {"key": "k"})
            await c.call_tool("end_session", {"session_id": sid})

    asyncio.run(main())


def _cli(engine: LocalDynamoDB, table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command of ``python -m sessionstore`` that reads or creates the table."""
    from sessionstore import cli

    store = ss.SessionStore(ss.connect(engine.endpoint_url), table, ids=TenantIds("acme"))
    sid = store.create_session(owner="alice", attributes={"t": 1}).session_id
    store.activate(sid, owner="alice")
    store.append_context(sid, ["m"], owner="alice")
    store.record_tool_call(sid, "c", "tool", {}, None, 1, owner="alice")
    monkeypatch.setenv("SESSIONSTORE_ENDPOINT_URL", engine.endpoint_url)
    for args in (
        ["create-table", "--table", table],
        ["show", sid, "--table", table, "--owner", "alice"],
        ["show", sid, "--table", table, "--owner", "alice", "--json"],
        ["context", sid, "--table", table, "--owner", "alice"],
        ["history", sid, "--table", table, "--owner", "alice"],
    ):
        assert cli.main(args) == 0, args


def test_every_path_sends_only_what_the_policy_grants(
    client: Any,
    engine: LocalDynamoDB,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Review: a tool call on an instance whose clock lagged the session's idle deadline sent
    a ConditionCheck, which the policy did not grant: AccessDenied. Every request of every path
    -- the store's methods, lagging clocks, MCP on both protocols with asks and answers,
    FastMCP, the CLI -- recorded from every client, each transaction's members as their own
    IAM actions."""
    paths = [
        lambda: _exercise(client, table, "acme"),
        lambda: _lagging_clocks(client, table),
        lambda: _mcp(engine, table),
        lambda: _fastmcp(client, table),
        lambda: _cli(engine, table, monkeypatch),
    ]
    with RequestLog.every_client(client) as log:
        for path in paths:
            before = log.count
            path()
            assert log.count > before  # its clients were recorded
    capsys.readouterr()  # the CLI's tables
    sent = log.iam_actions()
    admin = {f"dynamodb:{a}" for a in ADMIN_ACTIONS}
    # Granted: everything sent (or it is refused), and nothing more (least privilege).
    assert sent - admin == _actions(_policy("iam-policy.json"))
    assert sent & admin <= _actions(_policy("iam-admin-policy.json"))


def test_policy_is_least_privilege_in_shape() -> None:
    policy = _policy("iam-policy.json")
    assert policy["Version"] == "2012-10-17"
    (statement,) = policy["Statement"]
    assert statement["Effect"] == "Allow"
    assert all("*" not in a and a.startswith("dynamodb:") for a in statement["Action"])
    assert not _actions(policy) & {f"dynamodb:{a}" for a in ADMIN_ACTIONS}
    resources_ = statement["Resource"]
    assert isinstance(resources_, str) and resources_.endswith(":table/mcp-sessions")
    condition = statement["Condition"]
    (pattern,) = condition["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
    assert pattern == "session#${" + TAG + "}.*"
    # ForAllValues is vacuously true with no leading key (a Scan): the key must be present.
    assert condition["Null"] == {"dynamodb:LeadingKeys": "false", TAG: "false"}
    admin = _policy("iam-admin-policy.json")
    assert all("Condition" not in s and s["Resource"] == resources_ for s in admin["Statement"])


def _allowed(leading_key: str, tenant: str) -> bool:
    """``ForAllValues:StringLike`` on one value, the tag substituted (``*`` and ``?`` only)."""
    (pattern,) = _policy("iam-policy.json")["Statement"][0]["Condition"]["ForAllValues:StringLike"][
        "dynamodb:LeadingKeys"
    ]
    pattern = pattern.replace("${" + TAG + "}", tenant)
    return fnmatchcase(leading_key, pattern.replace("[", "[[]"))


def test_leading_keys_confine_a_tenant_to_its_own_sessions(client: Any) -> None:
    with Calls(client) as calls:
        _exercise(client, "mcp-sessions-tenants", "acme")
    touched = list(calls.leading_keys())
    assert {op for op, _ in touched} >= {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "Query",
        "TransactWriteItems/Update",
        "TransactWriteItems/Put",
    }
    refused = [(op, key) for op, key in touched if not _allowed(key, "acme")]
    assert refused == [], "the policy would refuse the tenant's own requests"
    for other in ("acme-corp", "acm", "evil", "acme.x"):
        assert not any(_allowed(key, other) for _, key in touched), other
    assert not _allowed("session#acme-corp.0123", "acme")
    assert not _allowed("session#0123", "acme")  # an untenanted id is nobody's
