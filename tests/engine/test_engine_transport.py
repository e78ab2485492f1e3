"""The embedded engine without HTTP (``engine.transport``): the same answers, the same promises.

A client attached to the engine in this process sends no HTTP, and gets what a client over HTTP
gets: items, refusals with their ALL_OLD item, DynamoDB's 400s, a transaction's reasons, a lost
response's retry answered by its token, and linearizable updates from many threads.
"""

from __future__ import annotations

from typing import Any

import pytest

import sessionstore as ss
from sessionstore.engine import transport as engine_transport
from sessionstore.schema import create_table
from sessionstore.testing import Fault, FaultInjector
from sessionstore.tutorial import race

pytestmark = pytest.mark.embedded_only("talks to the embedded engine in this process")


@pytest.fixture
def direct(engine: Any) -> Any:
    return engine_transport.attach(ss.connect(engine.endpoint_url))


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "direct"}, "sk": {"S": sk}}


def test_the_same_answers_without_http(
    direct: Any, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import urllib3

    def no_http(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("an HTTP request was sent")

    monkeypatch.setattr(urllib3.connectionpool.HTTPConnectionPool, "urlopen", no_http)
    direct.put_item(TableName=table, Item={**_key("a"), "n": {"N": "1"}})
    assert direct.get_item(TableName=table, Key=_key("a"))["Item"]["n"] == {"N": "1"}
    with pytest.raises(direct.exceptions.ConditionalCheckFailedException) as refused:
        direct.put_item(
            TableName=table,
            Item=_key("a"),
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    assert refused.value.response["Item"]["n"] == {"N": "1"}
    with pytest.raises(direct.exceptions.ClientError) as malformed:
        direct.update_item(TableName=table, Key=_key("a"), UpdateExpression="SET #ver = :v")
    assert malformed.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert malformed.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(direct.exceptions.TransactionCanceledException) as cancelled:
        direct.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": _key("b")}},
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": _key("missing"),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    reasons = [r["Code"] for r in cancelled.value.response["CancellationReasons"]]
    assert reasons == ["None", "ConditionalCheckFailed"]
    assert "Item" not in direct.get_item(TableName=table, Key=_key("b"), ConsistentRead=True)


def test_a_lost_response_is_still_injected_and_answered(direct: Any, table: str) -> None:
    increment = {
        "Update": {
            "TableName": table,
            "Key": _key("c"),
            "UpdateExpression": "ADD n :one",
            "ExpressionAttributeValues": {":one": {"N": "1"}},
        }
    }
    with FaultInjector(
        direct, script=[Fault.LOST_RESPONSE], operations={"TransactWriteItems"}
    ) as faults:
        direct.transact_write_items(TransactItems=[increment])
    assert faults.injected[Fault.LOST_RESPONSE] == 1
    item = direct.get_item(TableName=table, Key=_key("c"), ConsistentRead=True)["Item"]
    assert item["n"] == {"N": "1"}


def test_linearizable_under_threads_without_http(direct: Any) -> None:
    create_table(direct, "race-direct")
    result = race.thread_race(direct, "race-direct", "threads", threads=8, per_worker=10)
    assert result.acknowledged == 80
    assert result.final_version == result.acknowledged
    assert result.elements == result.acknowledged and result.duplicates == 0


def test_connect_without_an_endpoint_skips_http(monkeypatch: pytest.MonkeyPatch) -> None:
    import urllib3

    for var in ("SESSIONSTORE_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(var, raising=False)
    client = ss.connect()

    def no_http(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("an HTTP request was sent")

    monkeypatch.setattr(urllib3.connectionpool.HTTPConnectionPool, "urlopen", no_http)
    store = ss.SessionStore(client, "direct-connect")
    store.create_table()
    session = store.activate(store.create_session().session_id)
    assert store.get_session(session.session_id).status is ss.Status.ACTIVE
