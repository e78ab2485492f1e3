"""OpenTelemetry: spans and counters per store operation, with the SDK's in-memory exporters.

The providers are handed to ``telemetry.configure`` (and the MCP SDK's tracer patched for one
test): nothing is set globally, so no other test sees a provider.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import mcp.shared._otel
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.httpsession import URLLib3Session
from mcp import Client
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import sessionstore as ss
from sessionstore import metering, schema, sizing, telemetry, wire
from sessionstore.aio import AsyncSessionStore
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import RunningServer, SessionCalls, create_app, create_server, open_session
from sessionstore.retry import RetryPolicy
from sessionstore.testing import Fault, FaultInjector
from tests.conftest import scan

S = ss.Status
NS = "sessionstore."


@dataclass
class Otel:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    provider: TracerProvider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def ours(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(NS)]

    def totals(self, operation: str | None = None) -> dict[str, float]:
        """Counter name -> sum over its points (of one ``db.operation.name``, if given)."""
        data = self.reader.get_metrics_data()
        out: dict[str, float] = {}
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        assert isinstance(point, NumberDataPoint)  # counters only
                        labels = dict(point.attributes or {})
                        if operation is None or labels["db.operation.name"] == operation:
                            out[metric.name] = out.get(metric.name, 0) + point.value
        return out


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    telemetry.configure(tracer_provider=provider, meter_provider=meters)
    try:
        yield Otel(exporter, reader, provider)
    finally:
        telemetry.configure()  # back to the (unset) global providers
        provider.shutdown()
        meters.shutdown()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k.removeprefix(NS): v for k, v in (span.attributes or {}).items()}


def item(client: Any, table: str, sk: str) -> dict[str, Any]:
    (found,) = [i for i in scan(client, table) if i["sk"]["S"] == sk]
    return found


def wcu(found: dict[str, Any], *, transactional: bool = False) -> int:
    return sizing.write_units(sizing.item_size(found), transactional=transactional)


# ---------------------------------------------------------------------------- one span per op


def test_each_operation_is_one_span_with_its_requests_and_units(
    otel: Otel, store: ss.SessionStore, client: Any, table: str
) -> None:
    sid = store.create_session(owner="alice").session_id
    created = wcu(item(client, table, schema.META_SK))
    store.activate(sid, owner="alice")  # folds its transition into one span
    activated = wcu(item(client, table, schema.META_SK))
    store.append_context(sid, [{"role": "user", "content": "hello"}], owner="alice")
    appended = wcu(item(client, table, schema.META_SK)) + wcu(
        item(client, table, schema.page_sk(0))
    )
    record = store.record_tool_call(
        sid, "call-1", "search", {"q": "x"}, {"hits": [1]}, 7, owner="alice"
    )
    recorded = (
        wcu(item(client, table, schema.META_SK), transactional=True)  # the session's Update
        + wcu(item(client, table, schema.tool_sk(record.tool_call_id)), transactional=True)
    )
    assert (created, activated, appended, recorded) == (1, 1, 2, 4)  # small items: 1 KB each

    spans = otel.ours()
    assert [s.name for s in spans] == [
        "sessionstore.create_session",
        "sessionstore.activate",
        "sessionstore.append_context",
        "sessionstore.record_tool_call",
    ]
    seen = [
        {k: attrs(s)[k] for k in ("requests", "attempts", "write_units", "dynamodb_operations")}
        for s in spans
    ]
    assert seen == [
        {"requests": 1, "attempts": 1, "write_units": created, "dynamodb_operations": ("PutItem",)},
        {
            "requests": 1,
            "attempts": 1,
            "write_units": activated,
            "dynamodb_operations": ("UpdateItem",),
        },
        {
            "requests": 2,
            "attempts": 2,
            "write_units": appended,
            "dynamodb_operations": ("UpdateItem", "PutItem"),
        },
        {
            "requests": 1,
            "attempts": 1,
            "write_units": recorded,
            "dynamodb_operations": ("TransactWriteItems",),
        },
    ]
    for span in spans:
        a = attrs(span)
        assert span.kind is SpanKind.INTERNAL and span.status.status_code is StatusCode.UNSET
        assert a["db.system.name"] == "aws.dynamodb" and a["db.collection.name"] == table
        assert a["session_id"] == sid and a["outcome"] == "ok" and "owner" not in a
        assert a["conflicts"] == a["lost_responses"] == a["throttles"] == a["read_units"] == 0
    assert attrs(spans[-1])["tool_call_id"] == "call-1"
    assert spans[-1].attributes is not None and "alice" not in spans[-1].attributes.values()

    totals = otel.totals()
    assert totals["sessionstore.operations"] == 4
    assert totals["sessionstore.requests"] == totals["sessionstore.attempts"] == 5
    assert totals["sessionstore.write_units"] == created + activated + appended + recorded
    assert "sessionstore.read_units" not in totals and "sessionstore.conflicts" not in totals
    assert otel.totals("record_tool_call")["sessionstore.write_units"] == recorded


def test_reads_are_billed_on_what_came_back_and_lazy_pages_get_their_own_span(
    otel: Otel, store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    sid = active.session_id
    store.append_context(sid, ["x" * 3000], owner="alice")
    store.append_context(sid, ["y" * 3000], owner="alice")
    store.record_tool_call(sid, "c1", "t", {}, "z" * 3000, 1, owner="alice")
    otel.exporter.clear()

    loaded = store.load(sid, owner="alice")
    items = [i for i in scan(client, table) if i["sk"]["S"] <= schema.TOOLS_END]
    assert len(loaded.tool_calls) == 1 and len(items) == 4  # metadata, two pages, one record
    expected = sizing.query_read_units(map(sizing.item_size, items))
    assert expected == 3.0  # ~9.5 KB, rounded up once
    (load,) = otel.ours()
    assert attrs(load)["read_units"] == expected and attrs(load)["requests"] == 1

    otel.exporter.clear()
    reader = store.context(sid, owner="alice", after=0)  # a GetItem now, the pages when read
    assert [s.name for s in otel.ours()] == ["sessionstore.context"]
    assert list(reader) == ["y" * 3000]
    context, page = otel.ours()
    assert page.name == "sessionstore.read_page"
    assert attrs(context)["dynamodb_operations"] == ("GetItem",)
    assert attrs(page)["dynamodb_operations"] == ("Query",) and attrs(page)["session_id"] == sid


# ---------------------------------------------------------------------------- failures


@pytest.mark.parametrize("where", ["botocore", "driver"])
def test_a_lost_response_is_two_attempts_and_one_settled(
    otel: Otel, engine: LocalDynamoDB, table: str, clock: ss.ManualClock, where: str
) -> None:
    # botocore's own retry settles it (one request); with botocore not retrying, the driver
    # re-sends the same request (two requests).
    client = ss.connect(engine.endpoint_url, max_attempts=5 if where == "botocore" else 1)
    store = ss.SessionStore(client, table, clock=clock, retry=RetryPolicy(sleep=lambda _s: None))
    with FaultInjector(client, script=[Fault.LOST_RESPONSE]) as faults:
        store.create_session("lost")
    assert faults.injected[Fault.LOST_RESPONSE] == 1
    (span,) = otel.ours()
    a = attrs(span)
    assert a["attempts"] == 2 and a["lost_responses"] == 1 and a["lost_responses_settled"] == 1
    assert a["requests"] == (1 if where == "botocore" else 2)
    # Both attempts billed: the lost put landed, the second was refused by its condition.
    assert a["write_units"] == 2 * wcu(item(client, table, schema.META_SK)) == 2
    assert a["outcome"] == "ok" and span.status.status_code is StatusCode.UNSET
    totals = otel.totals()
    assert totals["sessionstore.lost_responses_settled"] == 1
    assert totals["sessionstore.attempts"] == 2


def test_lost_responses_that_never_settle_are_an_error(
    otel: Otel, engine: LocalDynamoDB, table: str, clock: ss.ManualClock
) -> None:
    client = ss.connect(engine.endpoint_url, max_attempts=1)
    store = ss.SessionStore(client, table, clock=clock, retry=RetryPolicy(sleep=lambda _s: None))
    with (
        FaultInjector(client, script=[Fault.LOST_RESPONSE] * 3),
        pytest.raises(ss.Unavailable) as caught,
    ):
        store.create_session("unknown")
    assert caught.value.maybe_applied
    (span,) = otel.ours()
    a = attrs(span)
    assert (a["requests"], a["lost_responses"], a["lost_responses_settled"]) == (3, 3, 0)
    assert a["outcome"] == "unavailable" and a["maybe_applied"] is True
    assert span.status.status_code is StatusCode.ERROR and a["error.type"] == "Unavailable"
    assert span.status.description == "Unavailable"  # the type only, never the message
    assert otel.totals()["sessionstore.operations"] == 1


class _Body:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_args: Any, **_kwargs: Any) -> Iterable[bytes]:
        yield self._body


def _corrupt_first_answer(client: Any) -> None:
    """The first attempt reaches the engine and is applied; its 2xx answer comes back with a
    CRC32 header that does not match the body, so botocore (legacy retry mode) retries it."""
    http = URLLib3Session()
    done: list[int] = []

    def on_send(request: Any, **_: Any) -> AWSResponse | None:
        if done:
            return None
        real = http.send(request)
        body = real.content
        headers = {k: v for k, v in real.headers.items() if k.lower() != "x-amz-crc32"}
        headers["x-amz-crc32"] = str(zlib.crc32(body) ^ 1)
        done.append(real.status_code)
        return AWSResponse(request.url, real.status_code, headers, _Body(body))

    client.meta.events.register("before-send.dynamodb", on_send)


@pytest.mark.parametrize("answer", ["2xx retried", "5xx"])
def test_an_attempt_the_wire_says_may_have_landed_is_a_lost_response(
    otel: Otel, engine: LocalDynamoDB, table: str, clock: ss.ManualClock, answer: str
) -> None:
    # One rule (``wire.may_have_landed``): a 2xx whose CRC32 check failed was applied and its
    # answer not taken, so it is as lost as a 5xx's -- the span counted only the 5xx before.
    if answer == "2xx retried":
        legacy = Config(retries={"mode": "legacy", "total_max_attempts": 3})
        client = ss.connect(engine.endpoint_url, config=legacy)
        _corrupt_first_answer(client)
        faults = None
    else:
        client = ss.connect(engine.endpoint_url)
        faults = FaultInjector(client, script=[Fault.SERVER_ERROR]).attach()
    marks: list[bool] = []

    def mark(caught_exception: Exception | None = None, response: Any = None, **_: Any) -> None:
        marks.append(wire.may_have_landed(caught_exception, response))

    client.meta.events.register("needs-retry.dynamodb", mark)
    store = ss.SessionStore(client, table, clock=clock, retry=RetryPolicy(sleep=lambda _s: None))
    store.create_session("retried")
    if faults is not None:
        assert faults.injected[Fault.SERVER_ERROR] == 1
    (span,) = otel.ours()
    a = attrs(span)
    # The first attempt may have landed; the second answered the request: the 4xx refusal of
    # the put retried (the first had landed), or after the 5xx the put's own 2xx -- which may
    # have landed too, but was heard, so it is no lost response.
    assert marks == [True, True] if answer == "5xx" else [True, False]
    assert (a["requests"], a["attempts"]) == (1, 2)
    assert (a["lost_responses"], a["lost_responses_settled"]) == (1, 1)
    assert a["outcome"] == "ok" and span.status.status_code is StatusCode.UNSET
    assert otel.totals()["sessionstore.lost_responses"] == 1


def test_conflicts_and_throttles_are_counted(
    otel: Otel, store: ss.SessionStore, client: Any, table: str, clock: ss.ManualClock
) -> None:
    sid = store.create_session().session_id
    other = ss.SessionStore(client, table, clock=clock)
    other.activate(sid)  # store's hint (version 1) is now stale
    otel.exporter.clear()
    store.update_status(sid, S.CLOSING)  # refused on the version, retried with ALL_OLD's
    with pytest.raises(ss.VersionConflict):  # stale: that is the answer, not retried
        store.update_attributes(sid, {"a": 1}, expected_version=1)
    retried, stale = otel.ours()
    assert (attrs(stale)["outcome"], attrs(stale)["conflicts"]) == ("version_conflict", 0)
    assert stale.status.status_code is StatusCode.UNSET
    assert (attrs(retried)["requests"], attrs(retried)["conflicts"]) == (2, 1)

    otel.exporter.clear()
    sid = store.activate(store.create_session().session_id).session_id
    otel.exporter.clear()
    with FaultInjector(client, script=[Fault.TRANSACTION_THROTTLED]):  # a cancellation reason
        store.record_tool_call(sid, "t1", "tool", {}, {}, 1)
    with FaultInjector(client, script=[Fault.THROTTLE]):  # retried inside botocore
        store.get_session(sid)
    record, get = otel.ours()
    assert (attrs(record)["requests"], attrs(record)["throttles"]) == (2, 1)
    assert attrs(record)["conflicts"] == 0
    assert attrs(record)["write_units"] == 4  # the throttled attempt is not billed
    assert (attrs(get)["requests"], attrs(get)["attempts"], attrs(get)["throttles"]) == (1, 2, 1)
    assert attrs(get)["read_units"] == 1.0
    assert otel.totals()["sessionstore.throttles"] == 2


def test_a_refusal_is_an_outcome_not_an_error(otel: Otel, store: ss.SessionStore) -> None:
    store.create_session("mine", owner="alice")
    with pytest.raises(ss.SessionNotFound):
        store.get_session("mine", owner="bob")  # another principal's: answered as missing
    with pytest.raises(ss.SessionAlreadyExists):
        store.create_session("mine")
    get, create = otel.ours()[1:]
    assert attrs(get)["outcome"] == "session_not_found"
    assert attrs(create)["outcome"] == "session_already_exists"
    for span in (get, create):
        assert span.status.status_code is StatusCode.UNSET and "error.type" not in attrs(span)
    assert attrs(create)["write_units"] == 1  # a refused conditional put is billed
    assert otel.totals("get_session")["sessionstore.operations"] == 1


# ---------------------------------------------------------------------------- in a server


def test_one_tool_call_is_a_claim_and_a_record_under_the_sdks_tools_call_span(
    otel: Otel,
    engine: LocalDynamoDB,
    table: str,
    clock: ss.ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The SDK traces through the global provider: point its tracer at ours for this test.
    monkeypatch.setattr(mcp.shared._otel, "_tracer", otel.provider.get_tracer("mcp-python-sdk"))
    client = ss.connect(engine.endpoint_url)
    store = ss.SessionStore(
        client, table, clock=clock, ids=ss.CounterIds(), retry=RetryPolicy(sleep=lambda _s: None)
    )
    server = create_server(store, state_keys=["test-request-state-key-0123456789abcdef"])

    async def main() -> str:
        async with RunningServer(create_app(server)) as running, Client(running.url) as mcp_client:
            sid = (await open_session(mcp_client)).session_id
            otel.exporter.clear()
            result = await SessionCalls(mcp_client, sid).call(
                "calculate", {"expression": "6 * 7"}, tool_call_id="call-1"
            )
            assert not result.is_error
            return sid

    sid = asyncio.run(asyncio.wait_for(main(), 60))

    (tools_call,) = [
        s for s in otel.spans() if s.kind is SpanKind.SERVER and s.name.startswith("tools/call")
    ]
    assert tools_call.context is not None
    under = [
        s
        for s in otel.ours()
        if s.parent is not None and s.parent.span_id == tools_call.context.span_id
    ]
    assert [s.name for s in under] == [
        "sessionstore.claim_tool_call",
        "sessionstore.complete_tool_call",
    ]
    assert under == otel.ours()  # nothing else of ours in this call
    meta = item(client, table, schema.META_SK)
    (stored,) = [i for i in scan(client, table) if i["sk"]["S"].startswith(schema.TOOL_PREFIX)]
    # The claim put a smaller item than the one completed, so its units are bounded by these.
    claim_units = wcu(meta, transactional=True) + wcu(stored, transactional=True)
    record_units = wcu(stored, transactional=False)
    assert (claim_units, record_units) == (4, 1)
    table_view = {
        s.name: (attrs(s)["requests"], attrs(s)["write_units"], attrs(s)["read_units"])
        for s in under
    }
    assert table_view == {
        "sessionstore.claim_tool_call": (1, claim_units, 0.0),
        "sessionstore.complete_tool_call": (1, record_units, 0.0),
    }
    assert sum(attrs(s)["requests"] for s in under) == 2
    assert sum(attrs(s)["write_units"] for s in under) == 5
    for span in under:
        assert attrs(span)["session_id"] == sid and attrs(span)["tool_call_id"] == "call-1"
        assert span.context is not None and span.context.trace_id == tools_call.context.trace_id
    assert otel.totals("claim_tool_call")["sessionstore.requests"] == 1


# ---------------------------------------------------------------------------- off


def test_without_a_provider_operations_work_and_nothing_is_recorded(
    store: ss.SessionStore, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not telemetry.enabled()  # no global provider, nothing configured

    def nothing(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("telemetry is off: no operation may be measured")

    monkeypatch.setattr(telemetry, "_Operation", nothing)
    monkeypatch.setattr(telemetry, "Tally", nothing)
    sid = store.create_session(owner="alice").session_id
    store.activate(sid, owner="alice")
    store.append_context(sid, ["hello"], owner="alice")
    store.record_tool_call(sid, "c1", "tool", {}, {}, 1, owner="alice")
    with FaultInjector(client, script=[Fault.LOST_RESPONSE]):
        store.update_attributes(sid, {"title": "t"}, owner="alice")
    assert list(store.context(sid, owner="alice")) == ["hello"]
    assert len(store.load(sid, owner="alice").tool_calls) == 1

    async def main() -> ss.Session:
        return await AsyncSessionStore(store).get_session(sid, owner="alice")

    assert asyncio.run(main()).attributes["title"] == "t"
    assert telemetry.current() is None
    assert not metering.instrumented(client)  # no request hook ever ran
