"""An UpdateItem whose answer leaves the old item out does not write it to JSON
(``engine.backup``), and every ``ReturnValues`` still answers as DynamoDB does.

The count is of moto's own ``Item.to_json`` calls, read by wrapping moto's class for the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sessionstore.local import LocalDynamoDB


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "backup"}, "sk": {"S": sk}}


@pytest.fixture
def written(engine: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    if not isinstance(engine, LocalDynamoDB):
        pytest.skip("counts moto's work in this process's engine")
    from moto.dynamodb.models.dynamo_type import Item

    counted: list[int] = []
    to_json = Item.to_json

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        counted.append(1)
        return to_json(self, *args, **kwargs)

    monkeypatch.setattr(Item, "to_json", counting)
    yield counted


def _update(client: Any, table: str, returns: str) -> Any:
    return client.update_item(
        TableName=table,
        Key=_key("a"),
        UpdateExpression="SET v = v + :one, w = :w",
        ExpressionAttributeValues={":one": {"N": "1"}, ":w": {"S": returns}},
        ReturnValues=returns,
    )


@pytest.mark.parametrize("returns", ["NONE", "ALL_NEW"])
def test_the_old_item_is_not_written_out_when_the_answer_leaves_it_out(
    client: Any, table: str, written: list[int], returns: str
) -> None:
    client.put_item(TableName=table, Item={**_key("a"), "v": {"N": "1"}, "x": {"S": "same"}})
    written.clear()
    answer = _update(client, table, returns)
    assert len(written) == 1  # the item as the update left it, once
    if returns == "ALL_NEW":
        assert answer["Attributes"] == {
            **_key("a"),
            "v": {"N": "2"},
            "w": {"S": "ALL_NEW"},
            "x": {"S": "same"},
        }
    else:
        assert "Attributes" not in answer


def test_every_return_values_answers_with_the_old_and_new_items(client: Any, table: str) -> None:
    client.put_item(TableName=table, Item={**_key("a"), "v": {"N": "1"}, "x": {"S": "same"}})
    assert _update(client, table, "ALL_OLD")["Attributes"] == {
        **_key("a"),
        "v": {"N": "1"},
        "x": {"S": "same"},
    }
    assert _update(client, table, "UPDATED_OLD")["Attributes"] == {
        "v": {"N": "2"},
        "w": {"S": "ALL_OLD"},
    }
    assert _update(client, table, "UPDATED_NEW")["Attributes"] == {
        "v": {"N": "4"},
        "w": {"S": "UPDATED_NEW"},
    }
    assert "Attributes" not in _update(client, table, "NONE")
    assert _update(client, table, "ALL_NEW")["Attributes"]["v"] == {"N": "6"}
