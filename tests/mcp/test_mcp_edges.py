"""At most once at the MCP edges, with the SDK's own ``Client`` over real HTTP on loopback:
a re-sent round of a multi-round-trip call, and calls whose record is too large to keep."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations
from mcp_types import INVALID_PARAMS, InputRequiredResult

import sessionstore as ss
from sessionstore import claims, codec, round_trips, schema, sizing
from sessionstore.clock import format_timestamp
from sessionstore.conditions import item_to_wire
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import protocol
from sessionstore.mcp.errors import to_mcp_error
from sessionstore.mcp.protocol import IdempotencyKey, SessionHandle
from sessionstore.tool_calls import call_item, recorded_fields
from tests.mcp.test_mcp_unmodified_clients import Instances, _run


def _replayed(result: Any) -> bool:
    return (result.meta or {}).get(protocol.REPLAYED_KEY) is True


class Charges:
    """A tool whose last round charges: the count that must never pass one per call."""

    def __init__(self) -> None:
        self.charged: list[str] = []
        self.release: asyncio.Event | None = None

    def tools(self, server: MCPServer) -> None:
        @server.tool()
        async def checkout(
            ctx: Context, session_id: SessionHandle = None, idempotency_key: IdempotencyKey = None
        ) -> str | InputRequiredResult:
            """Asks to confirm first; charges when the state comes back."""
            if ctx.request_state is None:
                return InputRequiredResult(request_state="confirm")
            if self.release is not None:
                await asyncio.wait_for(self.release.wait(), 30)
            self.charged.append(str(idempotency_key))
            return f"charged {idempotency_key}"


async def _first_round(client: Client, key: str) -> tuple[dict[str, Any], str | None]:
    """Open a session and run the first round of ``checkout``: its call and sealed state."""
    opened = await client.call_tool("open_session", {})
    call = {"session_id": opened.structured_content["session_id"], "idempotency_key": key}
    first = await client.session.call_tool("checkout", call, allow_input_required=True)
    assert isinstance(first, InputRequiredResult)
    return call, first.request_state


def test_a_re_sent_last_round_is_answered_from_the_record(
    engine: LocalDynamoDB, table: str
) -> None:
    """The client sends the last round, the response is lost, it sends it again (through a
    round robin, so to the other instance): the final step ran once, the repeat is replayed."""
    charges = Charges()
    instances = Instances(engine, table, tools=charges.tools)

    async def main() -> None:
        async with instances.behind_round_robin() as (_proxy, client):
            call, state = await _first_round(client, "order-7")
            done = await client.session.call_tool(
                "checkout", call, request_state=state, allow_input_required=True
            )
            again = await client.session.call_tool(
                "checkout", call, request_state=state, allow_input_required=True
            )
            assert done.content[0].text == again.content[0].text == "charged order-7"
            assert not _replayed(done) and _replayed(again)
        history = instances.stores[0].load(call["session_id"]).tool_calls
        assert [r.tool_call_id for r in history] == ["order-7"]

    _run(main)
    assert charges.charged == ["order-7"]


def test_a_last_round_sent_twice_at_once_runs_once(engine: LocalDynamoDB, table: str) -> None:
    charges = Charges()
    instances = Instances(engine, table, tools=charges.tools)

    async def main() -> None:
        charges.release = asyncio.Event()
        async with (
            instances.running() as a,
            instances.running() as b,
            Client(a.url) as ca,
            Client(b.url) as cb,
        ):
            call, state = await _first_round(ca, "order-8")
            running = asyncio.create_task(
                ca.session.call_tool("checkout", call, request_state=state)
            )
            for _ in range(500):  # until the first delivery holds the round
                if "round" in _call_item(instances, call):
                    break
                await asyncio.sleep(0.01)
            with pytest.raises(MCPError) as busy:
                await cb.session.call_tool("checkout", call, request_state=state)
            assert busy.value.code == protocol.TOOL_CALL_IN_PROGRESS
            charges.release.set()
            assert (await running).content[0].text == "charged order-8"
            again = await cb.session.call_tool("checkout", call, request_state=state)
            assert _replayed(again) and again.content[0].text == "charged order-8"

    _run(main)
    assert charges.charged == ["order-8"]


class ThreeRounds:
    """Asks twice, then charges: rounds 1 and 2 suspend, round 3 finishes."""

    def __init__(self) -> None:
        self.runs: list[str | None] = []

    def tools(self, server: MCPServer) -> None:
        @server.tool()
        async def booking(
            ctx: Context, session_id: SessionHandle = None, idempotency_key: IdempotencyKey = None
        ) -> str | InputRequiredResult:
            """Two questions, then the booking."""
            self.runs.append(ctx.request_state)
            if ctx.request_state is None:
                return InputRequiredResult(request_state="dates")
            if ctx.request_state == "dates":
                return InputRequiredResult(request_state="seats")
            return f"booked after {ctx.request_state}"


def test_a_re_sent_round_that_asked_for_input_gets_the_same_question_again(
    engine: LocalDynamoDB, table: str
) -> None:
    """A round that answered ``InputRequiredResult`` and whose answer was lost: sending it
    again must neither run it again nor strand the call; the question comes back, and the
    next round still runs once."""
    booking = ThreeRounds()
    instances = Instances(engine, table, tools=booking.tools)

    async def main() -> None:
        async with instances.behind_round_robin() as (_proxy, client):
            opened = await client.call_tool("open_session", {})
            sid = opened.structured_content["session_id"]
            call = {"session_id": sid, "idempotency_key": "trip-1"}
            ask = client.session.call_tool
            first = await ask("booking", call, allow_input_required=True)
            again = await ask("booking", call, allow_input_required=True)  # round 1 re-sent
            assert isinstance(first, InputRequiredResult)
            assert isinstance(again, InputRequiredResult) and _replayed(again)
            second = await ask(
                "booking", call, request_state=again.request_state, allow_input_required=True
            )
            lost = await ask(  # round 2 re-sent: its answer was lost on the way
                "booking", call, request_state=again.request_state, allow_input_required=True
            )
            assert isinstance(second, InputRequiredResult)
            assert isinstance(lost, InputRequiredResult) and _replayed(lost)
            done = await ask("booking", call, request_state=lost.request_state)
            assert done.content[0].text == "booked after seats"
            for state in (first.request_state, second.request_state):  # stale, re-sent
                late = await ask("booking", call, request_state=state)
                assert _replayed(late) and late.content[0].text == "booked after seats"
            repeat = await ask("booking", call)
            assert _replayed(repeat) and repeat.content[0].text == "booked after seats"
        history = instances.stores[0].load(sid).tool_calls
        assert [r.tool_call_id for r in history] == ["trip-1"]

    _run(main)
    assert booking.runs == [None, "dates", "seats"]  # each round ran once


def _call_item(instances: Instances, call: dict[str, Any]) -> dict[str, Any]:
    store = instances.stores[0]
    key = {
        "pk": {"S": schema.pk(call["session_id"])},
        "sk": {"S": schema.tool_sk(call["idempotency_key"])},
    }
    response = store.client.get_item(TableName=store.table_name, Key=key, ConsistentRead=True)
    return dict(response.get("Item", {}))


# ---------------------------------------------------------------------------- large arguments

BIG = "x" * 450_000  # past DynamoDB's 400 KB item, well inside the SDK's 4 MiB body


class Sizes:
    def __init__(self) -> None:
        self.runs: list[str] = []

    def tools(self, server: MCPServer) -> None:
        @server.tool()
        async def upload(
            blob: str, session_id: SessionHandle = None, idempotency_key: IdempotencyKey = None
        ) -> str:
            """Claimed (not harmless): runs at most once per key."""
            self.runs.append("upload")
            return f"stored {len(blob)} bytes"

        @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
        async def measure(blob: str, session_id: SessionHandle = None) -> str:
            """Read-only: not claimed, recorded after it runs."""
            self.runs.append("measure")
            return f"{len(blob)} bytes"

        @server.tool()
        async def echo_big(
            blob: str, session_id: SessionHandle = None, idempotency_key: IdempotencyKey = None
        ) -> str:
            """Its result is as large as its argument."""
            self.runs.append("echo_big")
            return blob


def test_a_call_with_arguments_too_large_to_keep_runs_once_and_keeps_its_result(
    engine: LocalDynamoDB, table: str
) -> None:
    sizes = Sizes()
    instances = Instances(engine, table, tools=sizes.tools)

    async def main() -> None:
        async with (
            instances.running() as a,
            instances.running() as b,
            Client(a.url) as ca,
            Client(b.url) as cb,
        ):
            opened = await ca.call_tool("open_session", {})
            sid = opened.structured_content["session_id"]
            call = {"blob": BIG, "session_id": sid, "idempotency_key": "up-1"}
            first = await ca.call_tool("upload", call)
            again = await cb.call_tool("upload", call)  # the retry, on the other instance
            assert first.content[0].text == again.content[0].text == "stored 450000 bytes"
            assert not first.is_error and _replayed(again)
            measured = await cb.call_tool("measure", {"blob": BIG, "session_id": sid})
            assert measured.content[0].text == "450000 bytes" and not measured.is_error
            echoed = await ca.call_tool("echo_big", {**call, "idempotency_key": "e-1"})
            assert echoed.content[0].text == BIG  # delivered this once
            replay = await cb.call_tool("echo_big", {**call, "idempotency_key": "e-1"})
            assert _replayed(replay) and replay.is_error  # too large to keep, and says so
            assert "tooLarge" in replay.content[0].text
        history = instances.stores[0].load(sid).tool_calls
        by_id = {r.tool_call_id: r for r in history}
        assert by_id["up-1"].input["tooLarge"]["bytes"] > len(BIG)  # kept as its size
        assert by_id["up-1"].output["callToolResult"]["content"][0]["text"] == (
            "stored 450000 bytes"
        )
        assert by_id["e-1"].output == {
            "tooLarge": {"bytes": by_id["e-1"].output["tooLarge"]["bytes"]}
        }
        assert len(history) == 3  # upload, measure, echo_big: every call recorded once

    _run(main)
    assert sizes.runs == ["upload", "measure", "echo_big"]


def test_a_size_problem_is_never_reported_as_unavailability() -> None:
    error = to_mcp_error(ss.ItemTooLarge(0, 500_000, 409_600))
    assert error.code == INVALID_PARAMS and error.code != protocol.STORE_UNAVAILABLE
    assert error.data == {"reason": "too_large", "bytes": 500_000, "limit": 409_600}


@pytest.mark.parametrize("rounds", [1, 2])
@pytest.mark.parametrize("slack", [0, 19, 40])
def test_a_result_at_the_item_size_limit_is_kept_whatever_the_claim_holds(
    store: ss.SessionStore, active: ss.Session, rounds: int, slack: int
) -> None:
    """A result that fits the record alone but not beside the claim's own fields (its lease
    while it is removed, a later round's number and token) is still written: kept whole when
    it fits, else as its size -- never refused after the tool ran."""
    sid = active.session_id
    arguments = {"a": 1}
    claimed = claims.claim(
        store.table, sid, "c1", "tool", arguments, owner="alice", ttl=active.ttl, lease_ms=60_000
    ).claim
    if rounds == 2:
        assert (
            round_trips.start_round(store.table, claimed, 2, lease_ms=60_000).state
            is claims.State.CLAIMED
        )
    at = format_timestamp(store.clock.now_ms())
    held = call_item(sid, "c1", "tool", claimed.fingerprint, at, claimed.ttl)
    empty = recorded_fields(codec.encode(arguments), codec.encode(""), 1, at)
    size = store.item_size_limit - sizing.item_size(item_to_wire({**held, **empty})) - slack
    claims.complete(store.table, sid, "c1", claimed, arguments, "x" * size, 1)
    (record,) = store.tool_calls(sid, owner="alice")
    assert record.output == "x" * size or list(record.output) == ["tooLarge"]
