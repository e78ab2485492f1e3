"""``create_table`` when several instances start at once on a new table, on the embedded engine.

moto applies every ``UpdateTimeToLive``; real DynamoDB refuses one that another caller's has just
beaten. The refusals are injected on the wire (botocore's ``before-send``, as in
``sessionstore.testing.faults``) with the messages DynamoDB sends, and a rival client makes the
change that beat us for real.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

import sessionstore as ss
from sessionstore import schema
from sessionstore.local import LocalDynamoDB
from sessionstore.schema import TABLE_DEFINITION, create_table
from sessionstore.testing import RequestLog

ALREADY_ENABLED = "TimeToLive is already enabled"
MODIFIED = "Time to live has been modified multiple times within a fixed interval"
UPDATE_TTL = "before-send.dynamodb.UpdateTimeToLive"


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_args: Any, **_kwargs: Any) -> Iterator[bytes]:
        yield self._body


def _error(request: Any, code: str, message: str) -> AWSResponse:
    body = json.dumps({"__type": f"com.amazon.coral.validate#{code}", "message": message})
    headers: Any = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "injected"}
    return AWSResponse(request.url, 400, headers, _Raw(body.encode()))


def _enable_ttl(client: Any, table: str, attribute: str = "ttl") -> None:
    client.update_time_to_live(
        TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute}
    )


def _ttl(client: Any, table: str) -> dict[str, Any]:
    return dict(client.describe_time_to_live(TableName=table)["TimeToLiveDescription"])


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema, "_POLL_S", 0.01)


class OneTtlChangeAtATime:
    """DynamoDB's rule, which moto lacks: once one UpdateTimeToLive is through, later ones are
    refused (shared by every instance's client)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changed = False
        self.refused = 0

    def attach(self, client: Any) -> None:
        client.meta.events.register(UPDATE_TTL, self._on_send)

    def _on_send(self, request: Any, **_kwargs: Any) -> AWSResponse | None:
        with self._lock:
            if not self._changed:
                self._changed = True
                return None
            self.refused += 1
        return _error(request, "ValidationException", MODIFIED)


def test_instances_starting_at_once_on_a_new_table_all_start(engine: LocalDynamoDB) -> None:
    table = "create-together"
    rule = OneTtlChangeAtATime()
    start = threading.Barrier(2, timeout=10)
    # Both read TTL as DISABLED before either asks for it: both ask, one is refused.
    both_read_ttl = threading.Barrier(2, timeout=10)
    results: dict[int, bool] = {}
    errors: list[BaseException] = []

    def instance(i: int) -> None:
        client = ss.connect(engine.endpoint_url)
        rule.attach(client)
        read: list[bool] = []

        def after_ttl_read(**_kwargs: Any) -> None:
            if not read:
                read.append(True)
                both_read_ttl.wait()

        client.meta.events.register("after-call.dynamodb.DescribeTimeToLive", after_ttl_read)
        try:
            start.wait()
            results[i] = create_table(client, table, timeout_s=20)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=instance, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert sorted(results.values()) == [False, True]
    assert rule.refused == 1
    assert _ttl(ss.connect(engine.endpoint_url), table) == {
        "TimeToLiveStatus": "ENABLED",
        "AttributeName": "ttl",
    }


@pytest.mark.parametrize("message", [ALREADY_ENABLED, MODIFIED])
def test_a_refusal_because_another_instance_just_enabled_ttl_is_success(
    client: Any, engine: LocalDynamoDB, message: str
) -> None:
    table = f"create-beaten-{len(message)}"
    rival = ss.connect(engine.endpoint_url)
    refused: list[str] = []

    def beaten(request: Any, **_kwargs: Any) -> AWSResponse:
        _enable_ttl(rival, table)
        refused.append(message)
        return _error(request, "ValidationException", message)

    client.meta.events.register(UPDATE_TTL, beaten)
    assert create_table(client, table) is True
    assert refused == [message]
    assert _ttl(client, table) == {"TimeToLiveStatus": "ENABLED", "AttributeName": "ttl"}


def test_a_refusal_while_ttl_stays_off_is_raised(client: Any) -> None:
    """As after another caller's recent *disable*: the table has no TTL, and that is said.

    The table is made ACTIVE first, without TTL: CreateTable is asynchronous on other engines,
    and the short deadline is for re-reading TTL, not for waiting out CREATING."""
    table = "create-stays-off"
    client.create_table(TableName=table, **TABLE_DEFINITION)  # without TTL
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1})

    def refused(request: Any, **_kwargs: Any) -> AWSResponse:
        return _error(request, "ValidationException", MODIFIED)

    client.meta.events.register(UPDATE_TTL, refused)
    with RequestLog(client) as log, pytest.raises(ClientError, match="modified multiple times"):
        create_table(client, table, timeout_s=0.5)
    assert log.counts()["DescribeTimeToLive"] > 1  # read again in case it was stale


def test_a_refusal_with_ttl_on_another_attribute_is_raised(
    client: Any, engine: LocalDynamoDB
) -> None:
    table = "create-other-attribute"
    rival = ss.connect(engine.endpoint_url)

    def beaten(request: Any, **_kwargs: Any) -> AWSResponse:
        _enable_ttl(rival, table, attribute="expires")
        return _error(request, "ValidationException", MODIFIED)

    client.meta.events.register(UPDATE_TTL, beaten)
    with pytest.raises(ClientError, match="modified multiple times"):
        create_table(client, table)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (
            "ValidationException",
            "TimeToLive is active on a different AttributeName: current value of the "
            "attribute: expires",
        ),
        (
            "ValidationException",
            "1 validation error detected: Value null at 'timeToLiveSpecification.attributeName' "
            "failed to satisfy constraint: Member must not be null",
        ),
        ("AccessDeniedException", "not authorized to perform: dynamodb:UpdateTimeToLive"),
    ],
)
def test_any_other_error_from_update_time_to_live_is_raised_at_once(
    client: Any, code: str, message: str
) -> None:
    def failing(request: Any, **_kwargs: Any) -> AWSResponse:
        return _error(request, code, message)

    client.meta.events.register(UPDATE_TTL, failing)
    with RequestLog(client) as log, pytest.raises(ClientError) as raised:
        create_table(client, f"create-fails-{code}-{len(message)}")
    assert raised.value.response["Error"]["Code"] == code
    assert log.counts()["DescribeTimeToLive"] == 1


def test_a_table_another_instance_is_still_creating_is_waited_for(
    client: Any, engine: LocalDynamoDB
) -> None:
    table = "create-still-creating"
    create_table(ss.connect(engine.endpoint_url), table)  # the other instance won
    client.update_time_to_live(  # ...and, in this story, has not got to TTL yet
        TableName=table, TimeToLiveSpecification={"Enabled": False, "AttributeName": "ttl"}
    )
    describes: list[str] = []

    def not_found_at_first(request: Any, **_kwargs: Any) -> AWSResponse | None:
        describes.append("sent")
        if len(describes) == 1:  # DescribeTable is eventually consistent after CreateTable
            return _error(request, "ResourceNotFoundException", "Requested resource not found")
        return None

    def creating_next(parsed: dict[str, Any], **_kwargs: Any) -> None:
        if len(describes) == 2:
            parsed["Table"]["TableStatus"] = "CREATING"

    client.meta.events.register("before-send.dynamodb.DescribeTable", not_found_at_first)
    client.meta.events.register("after-call.dynamodb.DescribeTable", creating_next)
    with RequestLog(client) as log:
        assert create_table(client, table) is False
    assert log.operations == [
        "CreateTable",
        "DescribeTable",  # not found yet
        "DescribeTable",  # CREATING
        "DescribeTable",  # ACTIVE
        "DescribeTimeToLive",
        "UpdateTimeToLive",
    ]
    assert _ttl(client, table) == {"TimeToLiveStatus": "ENABLED", "AttributeName": "ttl"}


def test_ttl_another_instance_is_enabling_is_left_alone(client: Any) -> None:
    def enabling(parsed: dict[str, Any], **_kwargs: Any) -> None:
        parsed["TimeToLiveDescription"] = {"TimeToLiveStatus": "ENABLING", "AttributeName": "ttl"}

    client.meta.events.register("after-call.dynamodb.DescribeTimeToLive", enabling)
    with RequestLog(client) as log:
        assert create_table(client, "create-enabling") is True
    assert "UpdateTimeToLive" not in log.operations


@pytest.mark.parametrize(
    "operation", ["CreateTable", "DescribeTable", "DescribeTimeToLive", "UpdateTimeToLive"]
)
def test_an_operation_the_engine_lacks_is_named(client: Any, operation: str) -> None:
    """An engine implementing part of the API (dynalite: no UpdateTimeToLive) answers 400 with
    ``UnknownOperationException`` and no message, as injected here: create_table says which
    operation the engine lacks, as the package's error, not as a raw ``ClientError``."""

    def unknown(request: Any, **_kwargs: Any) -> AWSResponse:
        body = json.dumps({"__type": "com.amazon.coral.service#UnknownOperationException"})
        headers: Any = {"Content-Type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, 400, headers, _Raw(body.encode()))

    client.meta.events.register(f"before-send.dynamodb.{operation}", unknown)
    with pytest.raises(ss.DynamoDBError) as raised:
        create_table(client, f"create-lacks-{operation.lower()}")
    assert raised.value.code == "UnknownOperationException"
    assert str(raised.value) == (
        f"UnknownOperationException: the engine at {client.meta.endpoint_url} lacks the "
        f"{operation} operation, which create_table needs "
        f"(table 'create-lacks-{operation.lower()}')"
    )
    assert isinstance(raised.value.__cause__, ClientError)
