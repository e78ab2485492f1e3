"""The engine evaluates each condition of a transaction once (``engine.transactions``), and a
transaction still keeps every promise: a condition refused cancels it whole, with its reason and
``ALL_OLD``; a condition met lets every action run.

The count is of moto's own evaluations (its comparison operator's ``expr``), read by wrapping
moto's class for the test, never our code.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sessionstore.local import LocalDynamoDB


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "conditions"}, "sk": {"S": sk}}


@pytest.fixture
def evaluations(engine: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How often moto evaluated an ``=`` comparison, in this process's engine."""
    if not isinstance(engine, LocalDynamoDB):
        pytest.skip("counts evaluations in this process's engine")
    from moto.dynamodb import comparisons

    counted: list[int] = []
    expr = comparisons.OpEqual.expr

    def counting(self: Any, item: Any) -> Any:
        counted.append(1)
        return expr(self, item)

    monkeypatch.setattr(comparisons.OpEqual, "expr", counting)
    yield counted


def _transaction(client: Any, table: str, version: str, *, put_condition: str | None) -> Any:
    put: dict[str, Any] = {"TableName": table, "Item": {**_key("b"), "v": {"S": "new"}}}
    if put_condition:
        put["ConditionExpression"] = put_condition
    return client.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": table,
                    "Key": _key("a"),
                    "UpdateExpression": "SET #v = #v + :one",
                    "ConditionExpression": "#v = :expected",
                    "ExpressionAttributeNames": {"#v": "version"},
                    "ExpressionAttributeValues": {":one": {"N": "1"}, ":expected": {"N": version}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {"Put": put},
        ]
    )


def test_each_condition_of_a_transaction_is_evaluated_once(
    client: Any, table: str, evaluations: list[int]
) -> None:
    client.put_item(TableName=table, Item={**_key("a"), "version": {"N": "1"}})
    evaluations.clear()
    _transaction(client, table, "1", put_condition=None)
    assert len(evaluations) == 1
    item = client.get_item(TableName=table, Key=_key("a"), ConsistentRead=True)["Item"]
    assert item["version"] == {"N": "2"}


def test_a_refused_condition_still_cancels_the_whole_transaction(client: Any, table: str) -> None:
    client.put_item(TableName=table, Item={**_key("a"), "version": {"N": "5"}})
    with pytest.raises(client.exceptions.TransactionCanceledException) as caught:
        _transaction(client, table, "4", put_condition=None)
    reasons = caught.value.response["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["ConditionalCheckFailed", "None"]
    assert reasons[0]["Item"]["version"] == {"N": "5"}
    assert "Item" not in client.get_item(TableName=table, Key=_key("b"), ConsistentRead=True)


def test_a_later_actions_refused_condition_puts_the_earlier_one_back(
    client: Any, table: str
) -> None:
    client.put_item(TableName=table, Item={**_key("a"), "version": {"N": "1"}})
    client.put_item(TableName=table, Item={**_key("b"), "v": {"S": "old"}})
    with pytest.raises(client.exceptions.TransactionCanceledException) as caught:
        _transaction(client, table, "1", put_condition="attribute_not_exists(pk)")
    reasons = caught.value.response["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["None", "ConditionalCheckFailed"]
    a = client.get_item(TableName=table, Key=_key("a"), ConsistentRead=True)["Item"]
    b = client.get_item(TableName=table, Key=_key("b"), ConsistentRead=True)["Item"]
    assert a["version"] == {"N": "1"} and b["v"] == {"S": "old"}


def test_a_condition_outside_a_transaction_is_still_evaluated(
    client: Any, table: str, evaluations: list[int]
) -> None:
    client.put_item(TableName=table, Item={**_key("a"), "version": {"N": "1"}})
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.put_item(
            TableName=table,
            Item={**_key("a"), "version": {"N": "9"}},
            ConditionExpression="version = :two",
            ExpressionAttributeValues={":two": {"N": "2"}},
        )
    assert evaluations
