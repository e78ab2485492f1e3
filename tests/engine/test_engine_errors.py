"""The engine answers a malformed request as DynamoDB does: 400 ValidationException, its message.

Raw requests, one attempt each. AWS wraps some messages in ``1 validation error detected: `` in
some regions only: optional here. A condition's syntax error is checked up to ``Syntax error;``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from botocore.config import Config

import sessionstore as ss
from tests.conftest import PREFIX

ENVELOPE = "(1 validation error detected: )?"
UNDEFINED_VALUE = (
    "An expression attribute value used in expression is not defined; attribute value: "
)
UNDEFINED_NAME = (
    "An expression attribute name used in the document path is not defined; attribute name: "
)
OVERLAP = "Two document paths overlap with each other; must remove or rewrite one of these paths; "
EMPTY_KEY = (
    "One or more parameter values are not valid. The AttributeValue for a key attribute cannot "
    "contain an empty string value. Key: pk"
)
N1 = {"N": "1"}


def key(pk: str = "p") -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": "s"}}


def update(**kwargs: Any) -> dict[str, Any]:
    return {"Key": key(), **kwargs}


def cond(op: str, **kwargs: Any) -> dict[str, Any]:
    where = "Item" if op == "Put" else "Key"
    return {"TransactItems": [{op: {"TableName": "{table}", where: key(), **kwargs}}]}


# (operation, request without TableName, DynamoDB's message: exact unless it ends with "...")
CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    "undefined value beside a defined one": (
        "update_item",
        update(
            UpdateExpression="SET #version = :seen",
            ConditionExpression="#version = :expected",
            ExpressionAttributeNames={"#version": "version"},
            ExpressionAttributeValues={":seen": N1},
        ),
        f"Invalid ConditionExpression: {UNDEFINED_VALUE}:expected",
    ),
    "undefined name": (
        "update_item",
        update(UpdateExpression="SET #ver = :v", ExpressionAttributeValues={":v": N1}),
        f"Invalid UpdateExpression: {UNDEFINED_NAME}#ver",
    ),
    "undefined name in a condition": (
        "update_item",
        update(
            UpdateExpression="SET a = :v",
            ConditionExpression="#ver = :v",
            ExpressionAttributeValues={":v": N1},
        ),
        f"Invalid ConditionExpression: {UNDEFINED_NAME}#ver",
    ),
    "condition without any values": (
        "update_item",
        update(UpdateExpression="REMOVE a", ConditionExpression="a = :nope"),
        f"Invalid ConditionExpression: {UNDEFINED_VALUE}:nope",
    ),
    "unused value": (
        "update_item",
        update(UpdateExpression="SET a = :v", ExpressionAttributeValues={":v": N1, ":w": N1}),
        "Value provided in ExpressionAttributeValues unused in expressions: keys: {:w}",
    ),
    "unused name": (
        "update_item",
        update(
            UpdateExpression="SET a = :v",
            ExpressionAttributeNames={"#n": "x"},
            ExpressionAttributeValues={":v": N1},
        ),
        "Value provided in ExpressionAttributeNames unused in expressions: keys: {#n}",
    ),
    "empty names map": (
        "update_item",
        update(
            UpdateExpression="SET a = :v",
            ExpressionAttributeNames={},
            ExpressionAttributeValues={":v": N1},
        ),
        "ExpressionAttributeNames must not be empty",
    ),
    "empty values map": (
        "update_item",
        update(UpdateExpression="SET a = b", ExpressionAttributeValues={}),
        "ExpressionAttributeValues must not be empty",
    ),
    "a name key without #": (
        "update_item",
        update(
            UpdateExpression="SET a = :v",
            ExpressionAttributeNames={"n": "x"},
            ExpressionAttributeValues={":v": N1},
        ),
        'ExpressionAttributeNames contains invalid key: Syntax error; key: "n"',
    ),
    "update syntax error": (
        "update_item",
        update(UpdateExpression="SET a = = :v", ExpressionAttributeValues={":v": N1}),
        'Invalid UpdateExpression: Syntax error; token: "=", near: "= = :v"',
    ),
    "condition syntax error": (
        "update_item",
        update(
            UpdateExpression="SET a = :v",
            ConditionExpression="a = = :v",
            ExpressionAttributeValues={":v": N1},
        ),
        "Invalid ConditionExpression: Syntax error; ...",
    ),
    "reserved word": (
        "update_item",
        update(UpdateExpression="SET status = :v", ExpressionAttributeValues={":v": N1}),
        "Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: status",
    ),
    "wrong operand type": (
        "update_item",
        update(
            UpdateExpression="SET a = list_append(:v, :w)",
            ExpressionAttributeValues={":v": N1, ":w": {"L": []}},
        ),
        "Invalid UpdateExpression: Incorrect operand type for operator or function; "
        "operator or function: list_append, operand type: N",
    ),
    "a number that is not one": (
        "update_item",
        update(UpdateExpression="SET a = :v", ExpressionAttributeValues={":v": {"N": "abc"}}),
        "ExpressionAttributeValues contains invalid value: The parameter cannot be converted "
        "to a numeric value: abc for key :v",
    ),
    "a value of no type": (
        "update_item",
        update(UpdateExpression="SET a = :v", ExpressionAttributeValues={":v": {}}),
        "ExpressionAttributeValues contains invalid value: Supplied AttributeValue is empty, "
        "must contain exactly one of the supported datatypes for key :v",
    ),
    "an empty key string": (
        "update_item",
        {
            **update(UpdateExpression="SET a = :v"),
            "Key": key(""),
            "ExpressionAttributeValues": {":v": N1},
        },
        EMPTY_KEY,
    ),
    "a key of another schema": (
        "update_item",
        {
            "Key": {"pk": {"S": "p"}},
            "UpdateExpression": "SET a = :v",
            "ExpressionAttributeValues": {":v": N1},
        },
        "The provided key element does not match the schema",
    ),
    "an empty update expression": (
        "update_item",
        update(UpdateExpression=" "),
        "Invalid UpdateExpression: The expression can not be empty;",
    ),
    "a path set twice": (
        "update_item",
        update(UpdateExpression="SET a = :v, a = :v", ExpressionAttributeValues={":v": N1}),
        f"Invalid UpdateExpression: {OVERLAP}path one: [a], path two: [a]",
    ),
    "overlapping paths": (
        "update_item",
        update(UpdateExpression="SET a = :v, a.b = :v", ExpressionAttributeValues={":v": N1}),
        f"Invalid UpdateExpression: {OVERLAP}path one: [a], path two: [a, b]",
    ),
    "a section twice": (
        "update_item",
        update(UpdateExpression="SET a = :v SET b = :v", ExpressionAttributeValues={":v": N1}),
        'Invalid UpdateExpression: The "SET" section can only be used once in an update '
        "expression;",
    ),
    "put: undefined value": (
        "put_item",
        {"Item": key(), "ConditionExpression": "a = :x"},
        f"Invalid ConditionExpression: {UNDEFINED_VALUE}:x",
    ),
    "put: undefined name": (
        "put_item",
        {"Item": key(), "ConditionExpression": "attribute_not_exists(#pk)"},
        f"Invalid ConditionExpression: {UNDEFINED_NAME}#pk",
    ),
    "put: unused value": (
        "put_item",
        {
            "Item": key(),
            "ConditionExpression": "attribute_not_exists(pk)",
            "ExpressionAttributeValues": {":n": {"S": "x"}},
        },
        "Value provided in ExpressionAttributeValues unused in expressions: keys: {:n}",
    ),
    "put: reserved word": (
        "put_item",
        {"Item": key(), "ConditionExpression": "attribute_not_exists(data)"},
        "Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: data",
    ),
    "put: duplicates in a set": (
        "put_item",
        {"Item": {**key(), "n": {"SS": ["a", "a"]}}},
        "One or more parameter values were invalid: Input collection [a, a] contains duplicates.",
    ),
    "delete: undefined name": (
        "delete_item",
        {"Key": key(), "ConditionExpression": "#a = :x", "ExpressionAttributeValues": {":x": N1}},
        f"Invalid ConditionExpression: {UNDEFINED_NAME}#a",
    ),
    "query: undefined value": (
        "query",
        {"KeyConditionExpression": "pk = :p"},
        f"Invalid KeyConditionExpression: {UNDEFINED_VALUE}:p",
    ),
    "query: undefined name": (
        "query",
        {"KeyConditionExpression": "#pk = :p", "ExpressionAttributeValues": {":p": {"S": "p"}}},
        f"Invalid KeyConditionExpression: {UNDEFINED_NAME}#pk",
    ),
    "query: unused value": (
        "query",
        {
            "KeyConditionExpression": "pk = :p",
            "ExpressionAttributeValues": {":p": {"S": "p"}, ":q": {"S": "q"}},
        },
        "Value provided in ExpressionAttributeValues unused in expressions: keys: {:q}",
    ),
    "query: syntax error": (
        "query",
        {"KeyConditionExpression": "pk = = :p", "ExpressionAttributeValues": {":p": {"S": "p"}}},
        "Invalid KeyConditionExpression: Syntax error; ...",
    ),
    "query: a key value of another type": (
        "query",
        {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": N1}},
        "One or more parameter values were invalid: Condition parameter type does not match "
        "schema type",
    ),
    "query: a filter's undefined value": (
        "query",
        {
            "KeyConditionExpression": "pk = :p",
            "FilterExpression": "a = :q",
            "ExpressionAttributeValues": {":p": {"S": "p"}},
        },
        f"Invalid FilterExpression: {UNDEFINED_VALUE}:q",
    ),
    "query: a filter's reserved word": (
        "query",
        {
            "KeyConditionExpression": "pk = :p",
            "FilterExpression": "data = :p",
            "ExpressionAttributeValues": {":p": {"S": "p"}},
        },
        "Invalid FilterExpression: Attribute name is a reserved keyword; reserved keyword: data",
    ),
    "query: a projection's undefined name": (
        "query",
        {
            "KeyConditionExpression": "pk = :p",
            "ProjectionExpression": "#x",
            "ExpressionAttributeValues": {":p": {"S": "p"}},
        },
        f"Invalid ProjectionExpression: {UNDEFINED_NAME}#x",
    ),
    "transaction: undefined value": (
        "transact_write_items",
        cond(
            "Update",
            UpdateExpression="SET a = :x",
            ConditionExpression="#v = :expected",
            ExpressionAttributeNames={"#v": "version"},
            ExpressionAttributeValues={":x": N1},
        ),
        f"Invalid ConditionExpression: {UNDEFINED_VALUE}:expected",
    ),
    "transaction: undefined name": (
        "transact_write_items",
        cond("Update", UpdateExpression="SET #ver = :x", ExpressionAttributeValues={":x": N1}),
        f"Invalid UpdateExpression: {UNDEFINED_NAME}#ver",
    ),
    "condition check: undefined value": (
        "transact_write_items",
        cond("ConditionCheck", ConditionExpression="a = :nope"),
        f"Invalid ConditionExpression: {UNDEFINED_VALUE}:nope",
    ),
    "condition check: undefined name": (
        "transact_write_items",
        cond("ConditionCheck", ConditionExpression="attribute_exists(#a)"),
        f"Invalid ConditionExpression: {UNDEFINED_NAME}#a",
    ),
    "condition check: unused value": (
        "transact_write_items",
        cond(
            "ConditionCheck",
            ConditionExpression="attribute_exists(a)",
            ExpressionAttributeValues={":x": N1},
        ),
        "Value provided in ExpressionAttributeValues unused in expressions: keys: {:x}",
    ),
    "condition check: syntax error": (
        "transact_write_items",
        cond("ConditionCheck", ConditionExpression="attribute_exists(a"),
        "Invalid ConditionExpression: Syntax error; ...",
    ),
    "transaction: overlapping paths": (
        "transact_write_items",
        cond(
            "Update", UpdateExpression="SET a = :x, a.b = :x", ExpressionAttributeValues={":x": N1}
        ),
        f"Invalid UpdateExpression: {OVERLAP}path one: [a], path two: [a, b]",
    ),
    "transaction: a put without its sort key": (
        "transact_write_items",
        {"TransactItems": [{"Put": {"TableName": "{table}", "Item": {"pk": {"S": "p"}}}}]},
        "One or more parameter values were invalid: Missing the key sk in the item",
    ),
    "transaction: a delete with an empty key string": (
        "transact_write_items",
        {"TransactItems": [{"Delete": {"TableName": "{table}", "Key": key("")}}]},
        EMPTY_KEY,
    ),
}


@pytest.fixture(scope="module")
def raw(engine: Any) -> Any:
    """One attempt per request: a 500 is not retried into a pass."""
    return ss.connect(
        engine.endpoint_url, config=Config(retries={"mode": "standard", "total_max_attempts": 1})
    )


@pytest.fixture(scope="module")
def errors_table(raw: Any) -> str:
    name = f"{PREFIX}engine-errors"
    ss.SessionStore(raw, name).create_table()
    return name


def _with_table(request: Any, table: str) -> Any:
    return json.loads(json.dumps(request).replace('"{table}"', json.dumps(table)))


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_malformed_request_is_dynamodb_400_with_its_message(
    raw: Any, errors_table: str, case: str
) -> None:
    operation, request, expected = CASES[case]
    request = _with_table(request, errors_table)
    if operation != "transact_write_items":
        request = {"TableName": errors_table, **request}
    with pytest.raises(raw.exceptions.ClientError) as caught:
        getattr(raw, operation)(**request)
    response = caught.value.response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400, response
    assert response["Error"]["Code"] == "ValidationException", response["Error"]
    message = response["Error"]["Message"]
    if expected.endswith("..."):
        assert re.match(ENVELOPE + re.escape(expected[:-3]), message), message
    else:
        assert re.fullmatch(ENVELOPE + re.escape(expected), message), message
    # nothing was written, whatever the case
    assert "Item" not in raw.get_item(TableName=errors_table, Key=key(), ConsistentRead=True)


@pytest.mark.embedded_only("moto's own failure is the engine's: another engine has others")
def test_whatever_moto_cannot_handle_is_a_400_not_a_500(raw: Any, errors_table: str) -> None:
    """``size`` of a number raises inside moto's condition evaluation: the net answers 400."""
    raw.put_item(TableName=errors_table, Item={**key("net"), "n": N1})
    with pytest.raises(raw.exceptions.ClientError) as caught:
        raw.delete_item(
            TableName=errors_table,
            Key=key("net"),
            ConditionExpression="size(n) > :z",
            ExpressionAttributeValues={":z": {"N": "0"}},
        )
    response = caught.value.response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400, response
    assert response["Error"]["Code"] in ("ValidationException", "ConditionalCheckFailedException")
