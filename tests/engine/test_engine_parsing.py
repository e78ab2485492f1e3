"""The engine reads a request's JSON along its shape by the keys on the wire (``engine.parsing``).

The parameters must be exactly moto's: the same members in the same order, blobs decoded, numbers
and timestamps converted, unknown members and nulls left out. Each request here is read by both
parsers and compared, order included; then a request of every kind of value goes through the
engine and comes back as it went in.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from sessionstore.engine import parsing as engine_parsing


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


EVERY_KIND = {
    "pk": {"S": "requests"},
    "sk": {"S": "every-kind"},
    "n": {"N": "-1.5e10"},
    "b": {"B": _b64(b"\x00\xffraw")},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": [_b64(b"x"), _b64(b"y")]},
    "t": {"BOOL": True},
    "f": {"BOOL": False},
    "null": {"NULL": True},
    "l": {"L": [{"S": "x"}, {"M": {"deep": {"B": _b64(b"z")}}}, {"L": []}]},
    "m": {"M": {"k": {"N": "1"}, "empty": {"M": {}}}},
}

REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("PutItem", {"TableName": "t", "Item": EVERY_KIND, "ReturnValues": "ALL_OLD"}),
    (
        "UpdateItem",
        {
            "ReturnValues": "ALL_NEW",  # not in the shape's order: moto's order comes back
            "TableName": "t",
            "Key": {"pk": {"S": "a"}, "sk": {"S": "b"}},
            "UpdateExpression": "SET #a = :v",
            "ConditionExpression": "#a <> :v",
            "ExpressionAttributeNames": {"#a": "a"},
            "ExpressionAttributeValues": {":v": {"B": _b64(b"blob")}},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "NotAMember": {"S": "dropped"},
            "ReturnConsumedCapacity": None,
        },
    ),
    (
        "TransactWriteItems",
        {
            "TransactItems": [
                {
                    "Update": {
                        "TableName": "t",
                        "Key": {"pk": {"S": "a"}, "sk": {"S": "b"}},
                        "UpdateExpression": "SET #a = :v",
                        "ExpressionAttributeNames": {"#a": "a"},
                        "ExpressionAttributeValues": {":v": {"M": {"x": {"NS": ["1"]}}}},
                    }
                },
                {"Put": {"TableName": "t", "Item": EVERY_KIND}},
                {"ConditionCheck": {"TableName": "t", "Key": {}, "ConditionExpression": "x"}},
            ],
            "ClientRequestToken": "token",
        },
    ),
    (
        "Query",
        {
            "TableName": "t",
            "Limit": 5,
            "ScanIndexForward": False,
            "ExclusiveStartKey": {"pk": {"S": "a"}, "sk": {"S": "b"}},
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": {"S": "a"}},
        },
    ),
    # every member of an attribute value given: moto's own walk, member by member
    ("PutItem", {"TableName": "t", "Item": {"x": {"S": "a", "N": "1", "BOOL": True}}}),
    ("Scan", {"TableName": "t", "Segment": 0, "TotalSegments": 2}),
]


def _ordered(value: Any) -> Any:
    """``value`` with every dict's order and every value's type made visible."""
    if isinstance(value, dict):
        return [(type(value).__name__, k, _ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return ["list", *(_ordered(v) for v in value)]
    return (type(value).__name__, value)


def _parse(action: str, body: dict[str, Any], *, ours: bool) -> Any:
    from moto.core.parse import JSONParser
    from moto.core.utils import get_service_model

    operation = get_service_model("dynamodb").operation_model(action)
    if ours:
        return engine_parsing.reader(operation.input_shape)(body)
    parser = JSONParser(operation, map_type=dict)
    return parser.parse(
        {
            "method": "POST",
            "values": {},
            "headers": {},
            "body": json.dumps(body).encode(),
            "url_path": "/",
            "url_params": {},
        }
    )


@pytest.mark.parametrize(("action", "body"), REQUESTS, ids=[a for a, _ in REQUESTS])
def test_the_parameters_are_motos_own(action: str, body: dict[str, Any]) -> None:
    ours = _parse(action, json.loads(json.dumps(body)), ours=True)
    assert _ordered(ours) == _ordered(_parse(action, body, ours=False))


def test_a_structure_read_by_its_keys_is_in_the_shapes_order() -> None:
    body = dict(reversed(list(REQUESTS[1][1].items())))
    parsed = _parse("UpdateItem", body, ours=True)
    assert list(parsed)[:2] == ["TableName", "Key"]
    assert "NotAMember" not in parsed and "ReturnConsumedCapacity" not in parsed
    assert parsed["ExpressionAttributeValues"][":v"] == {"B": b"blob"}


def test_every_kind_of_value_round_trips_through_the_engine(
    engine: Any, client: Any, table: str
) -> None:
    from moto.dynamodb.responses import DynamoHandler

    from sessionstore.local import LocalDynamoDB

    if isinstance(engine, LocalDynamoDB):  # this process's engine reads requests by their keys
        assert DynamoHandler.parse_parameters.__module__ == engine_parsing.__name__
    item = {k: v for k, v in EVERY_KIND.items() if k not in ("pk", "sk")}
    raw = {k: _decoded(v) for k, v in item.items()}
    key = {"pk": {"S": "requests"}, "sk": {"S": "round-trip"}}
    client.put_item(TableName=table, Item={**key, **raw})
    got = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    assert {k: v for k, v in got.items() if k not in key} == raw


def _decoded(value: Any) -> Any:
    """A wire value as boto3's client takes it (blobs as bytes, not base64)."""
    kind, data = next(iter(value.items()))
    if kind == "B":
        return {"B": base64.b64decode(data)}
    if kind == "BS":
        return {"BS": [base64.b64decode(d) for d in data]}
    if kind == "L":
        return {"L": [_decoded(v) for v in data]}
    if kind == "M":
        return {"M": {k: _decoded(v) for k, v in data.items()}}
    return value


@pytest.mark.parametrize(
    "body",
    [
        {"TableName": "t", "Key": "not a map"},
        {"TableName": "t", "Key": {"pk": ["not", "a", "value"]}},
        {"TableName": "t", "Key": {"pk": {"L": {"not": "a list"}}}},
    ],
)
def test_a_value_of_a_type_its_shape_does_not_expect_is_left_to_moto(body: Any) -> None:
    from moto.core.utils import get_service_model

    shape = get_service_model("dynamodb").operation_model("GetItem").input_shape
    with pytest.raises(engine_parsing._Unexpected):
        engine_parsing.reader(shape)(body)


def test_numbers_given_as_text_are_converted_as_moto_converts_them() -> None:
    body = {"TableName": "t", "Limit": "5", "Segment": 1, "TotalSegments": "2"}
    assert _ordered(_parse("Scan", body, ours=True)) == _ordered(_parse("Scan", body, ours=False))
