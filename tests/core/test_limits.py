"""DynamoDB's documented limits (issue 20, items 5 and 8).

* A request past a limit of "Constraints in Amazon DynamoDB" (an expression's length, the
  operators of an UpdateExpression, a whole item's size) is refused by ``wire.send`` with
  ``InvalidInput`` before anything is sent;
* a ValidationException is ``ItemTooLarge`` only when it is about item size;
* the embedded engine takes an item of exactly 409,600 bytes by DynamoDB's size rules and
  refuses one of 409,601 (stock moto: 405,000 of its own count), and takes every expression
  DynamoDB takes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

import sessionstore as ss
from sessionstore import limits, sizing
from sessionstore.errors import ItemOverLimit, RequestOverLimit
from sessionstore.limits import check_limits
from sessionstore.testing import RequestLog
from sessionstore.wire import is_item_size_message, send
from tests.conftest import scan

LIMIT = sizing.MAX_ITEM_BYTES

ITEM_SIZE = "Item size has exceeded the maximum allowed size"
ITEM_SIZE_TO_UPDATE = "Item size to update has exceeded the maximum allowed size"
EXPRESSION_SIZE = (
    "Invalid UpdateExpression: Expression size has exceeded the maximum allowed size; "
    "expression size: 4116"
)
HASHKEY_SIZE = (
    "One or more parameter values were invalid: Size of hashkey has exceeded the maximum size "
    "limit of2048 bytes"
)


def _key(sk: str = "x") -> dict[str, Any]:
    return {"pk": {"S": "limits"}, "sk": {"S": sk}}


def _sized_item(size: int, sk: str = "x") -> dict[str, Any]:
    """An item of exactly ``size`` bytes by ``sizing.item_size``, shaped like a page: numbers,
    a map, and a list of messages whose last one is cut to fit."""
    item: dict[str, Any] = {
        **_key(sk),
        "first": {"N": "1234567"},
        "ttl": {"N": "17672256000"},
        "meta": {"M": {"k": {"S": "é"}, "l": {"L": [{"N": "1"}, {"BOOL": True}, {"NULL": True}]}}},
        "messages": {"L": [{"S": "m" * 1_000} for _ in range(300)] + [{"S": ""}]},
    }
    item["messages"]["L"][-1]["S"] = "y" * (size - sizing.item_size(item))
    assert sizing.item_size(item) == size
    return item


def _send(client: Any, table: str, operation: str, **request: Any) -> Any:
    """Through ``wire.send``, the one place every request of the store passes."""
    if not operation.startswith("transact_"):
        request = {"TableName": table, **request}
    return send(client, operation, request, table, LIMIT)


@pytest.fixture
def sent(client: Any) -> Iterator[RequestLog]:
    with RequestLog(client) as log:
        yield log


# ---------------------------------------------------------------- the known case: attributes


def test_update_attributes_whose_expression_passes_4_kb_is_refused_unsent(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    """279 names build an UpdateExpression over 4 KB (191 did when they were keys of a map on the
    metadata item): once a 500 from the embedded engine five times over (DynamoDBError), on
    DynamoDB a ValidationException reported as ItemTooLarge."""
    sid = active.session_id
    before = scan(client, table)
    with RequestLog(client) as log, pytest.raises(ss.InvalidInput) as caught:
        store.update_attributes(sid, {f"name_{i}": i for i in range(279)}, owner="alice")
    assert log.count == 0
    error = caught.value
    assert isinstance(error, RequestOverLimit) and not isinstance(error, ss.ItemTooLarge)
    assert error.size > limits.MAX_EXPRESSION_BYTES == error.maximum
    message = str(error)
    assert "\n" not in message
    assert "UpdateExpression" in message and "4,096" in message and f"{error.size:,}" in message
    assert scan(client, table) == before  # nothing written
    assert store.get_session(sid, owner="alice").version == active.version


def test_update_attributes_with_many_names_under_4_kb_is_stored(
    store: ss.SessionStore, active: ss.Session, requests: RequestLog
) -> None:
    """278 names: under 4 KB, so DynamoDB takes it; the embedded engine did not (moto recursed
    past Python's limit from ~153 SET actions on and answered 500)."""
    changes = {f"name_{i}": i for i in range(278)}
    requests.reset()
    store.update_attributes(active.session_id, changes, owner="alice")
    assert requests.counts() == {"TransactWriteItems": 1}
    assert dict(store.get_session(active.session_id, owner="alice").attributes) == changes


# ---------------------------------------------------------------- expression limits


@pytest.mark.parametrize(
    ("operation", "field", "extra"),
    [
        ("update_item", "UpdateExpression", {"Key": _key()}),
        ("update_item", "ConditionExpression", {"Key": _key(), "UpdateExpression": "SET #a = :v"}),
        ("put_item", "ConditionExpression", {"Item": _key()}),
        ("delete_item", "ConditionExpression", {"Key": _key()}),
        ("query", "KeyConditionExpression", {}),
        ("query", "FilterExpression", {"KeyConditionExpression": "#p = :p"}),
        ("get_item", "ProjectionExpression", {"Key": _key()}),
    ],
)
def test_an_expression_over_4_kb_is_refused_unsent(
    client: Any, table: str, sent: RequestLog, operation: str, field: str, extra: dict[str, Any]
) -> None:
    over = "#a = :v AND " + " " * (limits.MAX_EXPRESSION_BYTES - 18) + "#a = :v"
    assert len(over) == limits.MAX_EXPRESSION_BYTES + 1
    with pytest.raises(RequestOverLimit) as caught:
        _send(client, table, operation, **extra, **{field: over})
    assert sent.count == 0
    assert isinstance(caught.value, ss.InvalidInput)
    api = "".join(p.title() for p in operation.split("_"))
    assert str(caught.value) == (
        f"{api} {field}: 4,097 bytes, over DynamoDB's limit of 4,096 bytes"
    )


def test_expression_length_is_counted_in_utf_8_bytes() -> None:
    at = "é" * (limits.MAX_EXPRESSION_BYTES // 2)  # 2,048 characters, 4,096 bytes
    check_limits("get_item", {"ProjectionExpression": at})
    with pytest.raises(RequestOverLimit, match="4,098 bytes"):
        check_limits("get_item", {"ProjectionExpression": at + "é"})
    check_limits("get_item", {"ProjectionExpression": "a" * 4_096})
    with pytest.raises(RequestOverLimit, match="ProjectionExpression: 4,097 bytes"):
        check_limits("get_item", {"ProjectionExpression": "a" * 4_097})


def _plus(count: int) -> dict[str, Any]:
    """SET n0=:a+:a, n1=:a+:a, ...: ``count`` operators, one per action -- DynamoDB's grammar
    takes one ``+`` per action, not ``:a + :b + :c``. Unspaced, so 300 fit in 4 KB."""
    return {
        "Key": _key("plus"),
        "UpdateExpression": "SET " + ", ".join(f"n{i}=:a+:a" for i in range(count)),
        "ExpressionAttributeValues": {":a": {"N": "1"}},
    }


def test_update_expression_operators_are_limited_to_300(
    client: Any, table: str, sent: RequestLog
) -> None:
    with pytest.raises(RequestOverLimit) as caught:
        _send(client, table, "update_item", **_plus(301))
    assert sent.count == 0
    assert str(caught.value) == (
        "UpdateItem UpdateExpression: 301 operators or functions, over DynamoDB's limit of 300 "
        "operators or functions"
    )
    taken = _plus(300)
    assert len(taken["UpdateExpression"]) < limits.MAX_EXPRESSION_BYTES
    _send(client, table, "update_item", **taken)  # taken, by the engine too
    item = client.get_item(TableName=table, Key=_key("plus"), ConsistentRead=True)["Item"]
    assert {k: v for k, v in item.items() if k.startswith("n")} == {
        f"n{i}": {"N": "2"} for i in range(300)
    }


def test_operators_count_arithmetic_and_functions_not_the_actions() -> None:
    functions = ", ".join(f"#l{i} = list_append(#l{i}, :l)" for i in range(25))
    functions += ", " + ", ".join(f"#n{i} = if_not_exists(#n{i}, :z)" for i in range(25))
    sums = "#t = :a" + " + :a" * 200 + " - :b" * 50
    expression = f"SET {functions}, {sums}"  # 300, in under 4 KB
    assert len(expression) < limits.MAX_EXPRESSION_BYTES
    check_limits("update_item", {"UpdateExpression": expression})
    with pytest.raises(RequestOverLimit, match="301 operators"):
        check_limits("update_item", {"UpdateExpression": expression + ", #x = list_append(#x, :l)"})
    # Commas, parentheses of nothing and placeholders are not operators.
    many = "SET " + ", ".join(f"#k{i} = :v{i}" for i in range(200)) + " REMOVE #q"
    check_limits("update_item", {"UpdateExpression": many})


# ---------------------------------------------------------------- whole items, transactions


def test_an_item_over_409_600_bytes_is_refused_unsent(
    client: Any, table: str, sent: RequestLog
) -> None:
    with pytest.raises(ItemOverLimit) as caught:
        _send(client, table, "put_item", Item=_sized_item(LIMIT + 1))
    assert sent.count == 0
    error = caught.value
    assert isinstance(error, ss.InvalidInput) and isinstance(error, ss.ItemTooLarge)
    assert not error.by_engine and (error.added, error.limit) == (LIMIT + 1, LIMIT)
    assert str(error) == "PutItem Item: 409,601 bytes, over DynamoDB's limit of 409,600 bytes"
    _send(client, table, "put_item", Item=_sized_item(LIMIT))
    assert sent.counts() == {"PutItem": 1}
    assert sizing.item_size(stored_item(client, table)) == LIMIT


def stored_item(client: Any, table: str, sk: str = "x") -> dict[str, Any]:
    return dict(client.get_item(TableName=table, Key=_key(sk), ConsistentRead=True)["Item"])


def _puts(table: str, items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"Put": {"TableName": table, "Item": item}} for item in items]


def test_a_transactions_put_over_409_600_bytes_is_refused_unsent(
    client: Any, table: str, sent: RequestLog
) -> None:
    small = {**_key("s"), "v": {"N": "1"}}
    with pytest.raises(ItemOverLimit) as too_large:
        _send(
            client,
            table,
            "transact_write_items",
            TransactItems=_puts(table, [small, _sized_item(LIMIT + 1)]),
        )
    assert str(too_large.value).startswith("TransactWriteItems TransactItems[1].Put Item: 409,601")
    assert sent.count == 0
    _send(client, table, "transact_write_items", TransactItems=_puts(table, [_sized_item(LIMIT)]))
    assert sizing.item_size(stored_item(client, table)) == LIMIT


def test_typical_requests_pass_untouched() -> None:
    check_limits("get_item", {"TableName": "t", "Key": _key()})
    check_limits("transact_write_items", {"TransactItems": []})
    check_limits("update_item", {"UpdateExpression": "SET #a = :v"})


# ---------------------------------------------------------------- refusals from DynamoDB


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_args: Any, **_kwargs: Any) -> Iterator[bytes]:
        yield self._body


def _refusal(code: str, message: str, **fields: Any) -> Callable[..., AWSResponse]:
    """A before-send handler answering as DynamoDB does when it refuses (nothing applied)."""
    body = json.dumps(
        {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **fields}
    ).encode()

    def answer(request: Any, **_: Any) -> AWSResponse:
        headers: Any = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": "x"}
        return AWSResponse(request.url, 400, headers, _Raw(body))

    return answer


def _cancelled(*reasons: dict[str, str]) -> Callable[..., AWSResponse]:
    codes = ", ".join(r["Code"] for r in reasons)
    return _refusal(
        "TransactionCanceledException",
        f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
        CancellationReasons=list(reasons),
    )


@pytest.mark.parametrize(
    ("operation", "handler", "too_large"),
    [
        ("PutItem", _refusal("ValidationException", ITEM_SIZE), True),
        ("UpdateItem", _refusal("ValidationException", ITEM_SIZE_TO_UPDATE), True),
        (
            "UpdateItem",
            _refusal(
                "ValidationException",
                f"ExpressionAttributeValues contains invalid value: {ITEM_SIZE} for key :big",
            ),
            True,
        ),
        ("UpdateItem", _refusal("ValidationException", EXPRESSION_SIZE), False),
        ("PutItem", _refusal("ValidationException", HASHKEY_SIZE), False),
        (
            "UpdateItem",
            _refusal("ValidationException", "ExpressionAttributeValues exceeds max size"),
            False,
        ),
        (
            "TransactWriteItems",
            _cancelled({"Code": "None"}, {"Code": "ValidationError", "Message": ITEM_SIZE}),
            True,
        ),
        (
            "TransactWriteItems",
            _cancelled({"Code": "ValidationError", "Message": ITEM_SIZE_TO_UPDATE}),
            True,
        ),
        (
            "TransactWriteItems",
            _cancelled({"Code": "ValidationError", "Message": EXPRESSION_SIZE}, {"Code": "None"}),
            False,
        ),
    ],
)
def test_validation_exception_is_item_too_large_only_when_about_item_size(
    client: Any, table: str, operation: str, handler: Callable[..., AWSResponse], too_large: bool
) -> None:
    requests: dict[str, tuple[str, dict[str, Any]]] = {
        "PutItem": ("put_item", {"Item": _key()}),
        "UpdateItem": (
            "update_item",
            {
                "Key": _key(),
                "UpdateExpression": "REMOVE #a",
                "ExpressionAttributeNames": {"#a": "a"},
            },
        ),
        "TransactWriteItems": (
            "transact_write_items",
            {"TransactItems": _puts(table, [_key("t1"), _key("t2")])},
        ),
    }
    method, request = requests[operation]
    client.meta.events.register(f"before-send.dynamodb.{operation}", handler)
    try:
        with RequestLog(client) as log, pytest.raises(ss.SessionStoreError) as caught:
            _send(client, table, method, **request)
    finally:
        client.meta.events.unregister(f"before-send.dynamodb.{operation}", handler)
    assert log.count == 1  # sent, refused, not retried by botocore
    error = caught.value
    if too_large:
        assert isinstance(error, ss.ItemTooLarge) and error.by_engine
    else:
        assert isinstance(error, ss.DynamoDBError) and not isinstance(error, ss.InvalidInput)
        assert error.code in ("ValidationException", "TransactionCanceledException")
        assert "Item size" not in str(error)


def test_an_expression_refused_by_dynamodb_is_not_reported_as_item_too_large(
    store: ss.SessionStore, active: ss.Session, client: Any, table: str
) -> None:
    """What real DynamoDB answered to the 191-name update (had it been sent): a ValidationException
    that merely contains "size". Now DynamoDBError, once, and nothing written."""
    before = scan(client, table)
    handler = _refusal("ValidationException", EXPRESSION_SIZE)
    client.meta.events.register("before-send.dynamodb.TransactWriteItems", handler)
    try:
        with RequestLog(client) as log, pytest.raises(ss.DynamoDBError) as caught:
            store.update_attributes(active.session_id, {"a": 1}, owner="alice")
    finally:
        client.meta.events.unregister("before-send.dynamodb.TransactWriteItems", handler)
    assert log.counts() == {"TransactWriteItems": 1}  # refused: not retried
    assert not isinstance(caught.value, ss.ItemTooLarge)
    assert caught.value.code == "ValidationException" and "Expression size" in str(caught.value)
    assert scan(client, table) == before


def test_item_size_messages() -> None:
    for message in (ITEM_SIZE, ITEM_SIZE_TO_UPDATE, ITEM_SIZE.upper(), f"x: {ITEM_SIZE} (1)"):
        assert is_item_size_message(message)
    others: tuple[object, ...] = (EXPRESSION_SIZE, HASHKEY_SIZE, "size", "", None, 3, "Item size")
    for other in others:
        assert not is_item_size_message(other)


# ---------------------------------------------------------------- the engine's item size


def _put_edges(client: Any, table: str) -> None:
    """Through plain boto3: 409,600 bytes taken, 409,601 refused as DynamoDB refuses it."""
    at = _sized_item(LIMIT, "edge")
    client.put_item(TableName=table, Item=at)
    assert sizing.item_size(stored_item(client, table, "edge")) == LIMIT
    with pytest.raises(ClientError) as caught:
        client.put_item(TableName=table, Item=_sized_item(LIMIT + 1, "over"))
    error = caught.value.response["Error"]
    assert error["Code"] == "ValidationException" and is_item_size_message(error["Message"])
    assert "Item" not in client.get_item(TableName=table, Key=_key("over"), ConsistentRead=True)


def test_engine_takes_409_600_bytes_and_refuses_409_601(client: Any, table: str) -> None:
    _put_edges(client, table)


@pytest.mark.embedded_only("DynamoDB sizes an UpdateItem its own, undocumented way")
def test_engine_sizes_updates_and_transactions_by_the_item_they_make(
    client: Any, table: str
) -> None:
    # An update that takes an item to the edge, and one past it.
    client.put_item(TableName=table, Item={**_key("u"), "a": {"S": "x" * 200_000}})
    base = sizing.item_size({**_key("u"), "a": {"S": "x" * 200_000}, "b": {"S": ""}})

    def grow(total: int) -> None:
        client.update_item(
            TableName=table,
            Key=_key("u"),
            UpdateExpression="SET b = :b",
            ExpressionAttributeValues={":b": {"S": "z" * (total - base)}},
        )

    grow(LIMIT)
    assert sizing.item_size(stored_item(client, table, "u")) == LIMIT
    with pytest.raises(ClientError) as caught:
        grow(LIMIT + 1)
    assert is_item_size_message(caught.value.response["Error"]["Message"])
    # A transaction's Put, both edges.
    client.transact_write_items(TransactItems=_puts(table, [_sized_item(LIMIT, "t")]))
    with pytest.raises(ClientError) as refused:
        client.transact_write_items(TransactItems=_puts(table, [_sized_item(LIMIT + 1, "t2")]))
    assert refused.value.response["Error"]["Code"] in (
        "ValidationException",
        "TransactionCanceledException",
    )


@pytest.mark.embedded_only("starts python -m sessionstore engine")
def test_standalone_engine_takes_409_600_bytes_and_refuses_409_601() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "sessionstore", "engine"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        name, url = server.stdout.readline().strip().split("=", 1)
        assert name == "SESSIONSTORE_ENDPOINT_URL"
        client = ss.connect(url)
        ss.SessionStore(client, "edges").create_table()
        _put_edges(client, "edges")
    finally:
        server.terminate()
        server.wait(timeout=20)


@pytest.mark.parametrize("field", ["ExpressionAttributeNames", "ExpressionAttributeValues"])
def test_a_placeholder_no_expression_uses_is_refused_unsent(field: str) -> None:
    """DynamoDB refuses an unused placeholder (a ValidationException); the embedded engine takes
    it. Review: an attribute change's whole-map Put sent one (``:v0``, its incarnation) that
    its condition on ``rev`` did not use."""
    request: dict[str, Any] = {
        "TableName": "t",
        "Key": _key(),
        "ConditionExpression": "#r = :v1",
        "ExpressionAttributeNames": {"#r": "rev"},
        "ExpressionAttributeValues": {":v1": {"N": "1"}},
    }
    check_limits("delete_item", request)  # every placeholder used: fine
    request[field] = {**request[field], "#k1" if "Names" in field else ":v10": {"S": "x"}}
    if "Names" in field:
        request[field]["#k1"] = "x"
    with pytest.raises(ss.DynamoDBError) as caught:
        check_limits("delete_item", request)
    assert caught.value.code == "ValidationException" and "used in no expression" in str(
        caught.value
    )
