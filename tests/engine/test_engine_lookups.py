"""moto's per-request look-ups, done once (``engine.lookups``): its backend once per request,
its rewrite of an update text once per text -- with the same results.

Counts are of moto's own look-ups, read by wrapping moto's objects for the test.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from sessionstore.local import LocalDynamoDB


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "lookups"}, "sk": {"S": sk}}


@pytest.fixture
def in_process(engine: Any) -> Iterator[None]:
    if not isinstance(engine, LocalDynamoDB):
        pytest.skip("counts moto's work in this process's engine")
    yield


class _Counting:
    """moto's ``dynamodb_backends``, counting its look-ups by account."""

    def __init__(self, backends: Any) -> None:
        self.backends = backends
        self.count = 0

    def __getitem__(self, account: str) -> Any:
        self.count += 1
        return self.backends[account]


def test_a_transaction_looks_its_backend_up_once(
    in_process: None, client: Any, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb import responses

    counting = _Counting(responses.dynamodb_backends)
    monkeypatch.setattr(responses, "dynamodb_backends", counting)
    client.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": table,
                    "Key": _key(sk),
                    "UpdateExpression": "SET v = :v",
                    "ExpressionAttributeValues": {":v": {"S": sk}},
                }
            }
            for sk in ("a", "b", "c")
        ]
    )
    assert counting.count == 1
    item = client.get_item(TableName=table, Key=_key("c"), ConsistentRead=True)["Item"]
    assert item["v"] == {"S": "c"}


def test_the_rewrite_of_an_update_text_is_the_same_and_made_once(in_process: None) -> None:
    from moto.dynamodb import models

    text = "SET a = b + :c, d=:e - f"
    pattern = r"\s*([=\+-])\s*"
    assert models.re.sub(pattern, "\\1", text) == re.sub(pattern, "\\1", text)
    assert models.re.sub(pattern, "\\1", text) is models.re.sub(pattern, "\\1", text)
    assert models.re.sub("a", "b", "aA", flags=re.IGNORECASE) == "bb"  # other calls: re's own
    assert models.re.compile is re.compile


def test_updates_with_spaced_operators_still_apply(client: Any, table: str) -> None:
    client.put_item(TableName=table, Item={**_key("a"), "v": {"N": "1"}})
    for text in ("SET v = v + :one", "SET v=v+:one", "SET  v  =  v  -  :one"):
        client.update_item(
            TableName=table,
            Key=_key("a"),
            UpdateExpression=text,
            ExpressionAttributeValues={":one": {"N": "1"}},
        )
    item = client.get_item(TableName=table, Key=_key("a"), ConsistentRead=True)["Item"]
    assert item["v"] == {"N": "2"}
