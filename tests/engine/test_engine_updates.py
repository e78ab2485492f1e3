"""What an update does to an item, now that the engine evaluates it in one pass and backs it up
by what it can change.

The engine plans an update expression once per text and evaluates it per request; sizes the item
once, after all its actions; and backs an item up by the values an action reaches inside. These
tests pin what that must keep: every action kind's result, moto's own refusals (and an update
refused, whatever for, leaves the item exactly as it was), the size edges reached by many
``SET`` actions and by a nested one, a cancelled transaction's items exactly as they were (nested
maps, sets and lists included) with its ``ALL_OLD`` reasons, and old values returned where asked.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from sessionstore import sizing
from sessionstore.wire import is_item_size_message

LIMIT = sizing.MAX_ITEM_BYTES


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "updates"}, "sk": {"S": sk}}


def _item(client: Any, table: str, sk: str) -> dict[str, Any] | None:
    return client.get_item(TableName=table, Key=_key(sk), ConsistentRead=True).get("Item")  # type: ignore[no-any-return]


def _rich(sk: str) -> dict[str, Any]:
    """An item with a value of every shape an action can reach inside."""
    return {
        **_key(sk),
        "n": {"N": "5"},
        "s": {"S": "text"},
        "m": {"M": {"x": {"S": "1"}, "deep": {"M": {"y": {"N": "2"}}}}},
        "l": {"L": [{"S": "a"}, {"S": "b"}, {"M": {"z": {"S": "c"}}}]},
        "ss": {"SS": ["p", "q"]},
        "ns": {"NS": ["1", "2"]},
    }


def _update(client: Any, table: str, sk: str, text: str, **request: Any) -> Any:
    return client.update_item(
        TableName=table, Key=_key(sk), UpdateExpression=text, ReturnValues="ALL_NEW", **request
    )


def _refusal(caught: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = caught.value.response["Error"]
    return error["Code"], error["Message"]


UPDATE = (
    "SET #a = if_not_exists(#a, :zero) + :one, #m.#k = :v, #c = #n - :one, #l[1] = :v "
    "REMOVE #l[0], #m.#gone ADD #ss :more DELETE #ns :fewer"
)
NAMES = {
    "#a": "counter",
    "#m": "m",
    "#k": "new",
    "#c": "copy",
    "#n": "n",
    "#l": "l",
    "#gone": "x",
    "#ss": "ss",
    "#ns": "ns",
}


def _values(v: str) -> dict[str, Any]:
    return {
        ":zero": {"N": "0"},
        ":one": {"N": "1"},
        ":v": {"S": v},
        ":more": {"SS": ["r"]},
        ":fewer": {"NS": ["1"]},
    }


def test_every_action_kind_does_what_it_did_request_after_request(client: Any, table: str) -> None:
    client.put_item(TableName=table, Item=_rich("kinds"))
    for round_, v in enumerate(("first", "second")):  # the second: the planned text again
        after = _update(
            client,
            table,
            "kinds",
            UPDATE,
            ExpressionAttributeNames=NAMES,
            ExpressionAttributeValues=_values(v),
        )["Attributes"]
        assert after["counter"] == {"N": str(round_ + 1)}
        assert after["m"]["M"]["new"] == {"S": v}
        assert "x" not in after["m"]["M"] and after["m"]["M"]["deep"] == {"M": {"y": {"N": "2"}}}
        assert after["copy"] == {"N": "4"}
        assert sorted(after["ss"]["SS"]) == ["p", "q", "r"]
    assert after["ns"] == {"NS": ["2"]}
    # l was [a, b, {z}]: each round sets l[1], then removes l[0]
    assert after["l"] == {"L": [{"S": "second"}]}


def test_what_moto_refuses_it_still_refuses_with_its_message_and_the_item_is_unchanged(
    client: Any, table: str
) -> None:
    client.put_item(TableName=table, Item=_rich("refused"))
    good = {":v": {"N": "1"}}
    text = "SET #t = #f + :v"
    _update(client, table, "refused", text, ExpressionAttributeNames={"#t": "t", "#f": "n"},
            ExpressionAttributeValues=good)  # fmt: skip
    before = _item(client, table, "refused")
    cases = [
        ({"#t": "t", "#f": "missing"}, good, "refers to an attribute that does not exist"),
        ({"#t": "t", "#f": "s"}, good, "Incorrect operand type for operator or function"),
        ({"#t": "m.x", "#f": "n"}, {":v": {"S": "x"}}, "Incorrect operand type"),
    ]
    for names, values, message in cases:
        with pytest.raises(ClientError) as caught:
            _update(client, table, "refused", text, ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values)  # fmt: skip
        code, said = _refusal(caught)
        assert code == "ValidationException" and message in said, said
    with pytest.raises(ClientError) as caught:  # a path into a map that is not there
        _update(client, table, "refused", "SET #m.#no.#k = :v",
                ExpressionAttributeNames={"#m": "m", "#no": "no", "#k": "k"},
                ExpressionAttributeValues=good)  # fmt: skip
    assert "document path provided in the update expression is invalid" in _refusal(caught)[1]
    with pytest.raises(ClientError) as caught:  # a reserved word
        _update(client, table, "refused", "SET status = :v", ExpressionAttributeValues=good)
    assert "reserved keyword" in _refusal(caught)[1]
    with pytest.raises(ClientError) as caught:  # a key attribute
        _update(client, table, "refused", "SET #t = :v", ExpressionAttributeNames={"#t": "sk"},
                ExpressionAttributeValues=good)  # fmt: skip
    assert "key" in _refusal(caught)[1].lower()
    assert _item(client, table, "refused") == before


@pytest.mark.embedded_only("DynamoDB sizes an UpdateItem its own, undocumented way")
def test_many_set_actions_reach_the_limit_and_one_byte_more_is_refused_leaving_the_item(
    client: Any, table: str
) -> None:
    client.put_item(TableName=table, Item={**_key("many"), "m": {"M": {"x": {"S": "1"}}}})
    base = sizing.item_size({**_key("many"), "m": {"M": {"x": {"S": "1"}}}})
    names = [f"a{i:03d}" for i in range(100)]
    text = "SET " + ", ".join(f"{n} = :{n}" for n in names)

    def values(total: int) -> dict[str, Any]:
        each = (total - base) // len(names) - 4  # 4: each name's bytes
        out = {f":{n}": {"S": "v" * each} for n in names}
        rest = total - base - len(names) * (each + 4)
        out[f":{names[-1]}"] = {"S": "v" * (each + rest)}
        return out

    edge = {**_key("many"), "m": {"M": {"x": {"S": "1"}}}}
    edge.update({n: v for n, v in zip(names, values(LIMIT).values(), strict=True)})
    assert sizing.item_size(edge) == LIMIT
    before = _item(client, table, "many")
    with pytest.raises(ClientError) as caught:
        _update(client, table, "many", "SET m.y = :y, " + text[4:],
                ExpressionAttributeValues={**values(LIMIT), ":y": {"S": "y"}})  # fmt: skip
    assert is_item_size_message(_refusal(caught)[1])
    assert _item(client, table, "many") == before  # none of its actions done
    _update(client, table, "many", text, ExpressionAttributeValues=values(LIMIT))
    assert sizing.item_size(_item(client, table, "many")) == LIMIT  # type: ignore[arg-type]


@pytest.mark.embedded_only("DynamoDB sizes an UpdateItem its own, undocumented way")
def test_an_item_grown_past_the_limit_inside_a_map_is_refused(client: Any, table: str) -> None:
    client.put_item(TableName=table, Item={**_key("nested"), "m": {"M": {}}})
    base = sizing.item_size({**_key("nested"), "m": {"M": {"big": {"S": ""}}}})
    with pytest.raises(ClientError) as caught:
        _update(client, table, "nested", "SET m.big = :v",
                ExpressionAttributeValues={":v": {"S": "z" * (LIMIT + 1 - base)}})  # fmt: skip
    assert is_item_size_message(_refusal(caught)[1])
    assert _item(client, table, "nested") == {**_key("nested"), "m": {"M": {}}}
    _update(client, table, "nested", "SET m.big = :v",
            ExpressionAttributeValues={":v": {"S": "z" * (LIMIT - base)}})  # fmt: skip
    assert sizing.item_size(_item(client, table, "nested")) == LIMIT  # type: ignore[arg-type]


def test_a_cancelled_transaction_leaves_every_item_exactly_as_it_was(
    client: Any, table: str
) -> None:
    client.put_item(TableName=table, Item=_rich("changed"))
    client.put_item(TableName=table, Item=_rich("replaced"))
    client.put_item(TableName=table, Item=_rich("deleted"))
    before = {sk: _item(client, table, sk) for sk in ("changed", "replaced", "deleted")}
    update = {
        "TableName": table,
        "Key": _key("changed"),
        "UpdateExpression": UPDATE,
        "ExpressionAttributeNames": NAMES,
        "ExpressionAttributeValues": _values("v"),
    }
    with pytest.raises(ClientError) as caught:
        client.transact_write_items(
            TransactItems=[
                {"Update": update},
                {"Put": {"TableName": table, "Item": {**_key("replaced"), "n": {"N": "0"}}}},
                {"Delete": {"TableName": table, "Key": _key("deleted")}},
                {"Put": {"TableName": table, "Item": {**_key("created"), "n": {"N": "0"}}}},
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": _key("checked"),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
            ]
        )
    reasons = caught.value.response["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["None"] * 4 + ["ConditionalCheckFailed"]
    assert {sk: _item(client, table, sk) for sk in before} == before
    assert _item(client, table, "created") is None
    # ALL_OLD: the item as it was, after an update of it in the same transaction was undone
    with pytest.raises(ClientError) as failed:
        client.transact_write_items(
            TransactItems=[
                {"Update": {**update, "Key": _key("replaced")}},
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": _key("changed"),
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
            ]
        )
    assert failed.value.response["CancellationReasons"][1]["Item"] == before["changed"]
    assert _item(client, table, "replaced") == before["replaced"]


def test_old_values_are_returned_as_they_were_before_the_update(client: Any, table: str) -> None:
    client.put_item(TableName=table, Item=_rich("old"))
    old = _item(client, table, "old")
    asked = {"ExpressionAttributeNames": NAMES, "ExpressionAttributeValues": _values("v")}
    answer = client.update_item(TableName=table, Key=_key("old"), UpdateExpression=UPDATE,
                                ReturnValues="ALL_OLD", **asked)  # fmt: skip
    assert answer["Attributes"] == old
    changed = _item(client, table, "old")
    again = {**_values("w"), ":more": {"SS": ["t"]}}  # ADD changes the set in place
    answer = client.update_item(TableName=table, Key=_key("old"), UpdateExpression=UPDATE,
                                ReturnValues="UPDATED_OLD", ExpressionAttributeNames=NAMES,
                                ExpressionAttributeValues=again)  # fmt: skip
    assert answer["Attributes"]["ss"] == changed["ss"]  # type: ignore[index]
    assert answer["Attributes"]["m"] == changed["m"]  # type: ignore[index]


@pytest.mark.embedded_only("reads the engine's stream through its own endpoint")
def test_a_streams_old_image_is_the_item_before_an_update_inside_it(
    engine: Any, client: Any
) -> None:
    import boto3

    name = "updates-stream"
    created = client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    stream = created["TableDescription"]["LatestStreamArn"]
    old = {"pk": {"S": "a"}, "m": {"M": {"x": {"S": "1"}}}, "ss": {"SS": ["p"]}}
    client.put_item(TableName=name, Item=old)
    client.update_item(
        TableName=name,
        Key={"pk": {"S": "a"}},
        UpdateExpression="SET m.y = :v ADD ss :s",
        ExpressionAttributeValues={":v": {"S": "2"}, ":s": {"SS": ["q"]}},
    )
    streams = boto3.client(
        "dynamodbstreams",
        endpoint_url=engine.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="engine",
        aws_secret_access_key="engine",
    )
    shard = streams.describe_stream(StreamArn=stream)["StreamDescription"]["Shards"][0]
    at = streams.get_shard_iterator(
        StreamArn=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=at)["Records"]
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY"]
    assert records[1]["dynamodb"]["OldImage"] == old
    assert records[1]["dynamodb"]["NewImage"]["m"] == {"M": {"x": {"S": "1"}, "y": {"S": "2"}}}


def test_a_transactions_conditions_are_judged_by_each_requests_own_values(
    client: Any, table: str
) -> None:
    client.put_item(TableName=table, Item={**_key("cond"), "n": {"N": "1"}})

    def bump(expected: str) -> None:
        client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": _key("cond"),
                        "UpdateExpression": "SET n = n + :one",
                        "ConditionExpression": "n = :expected",
                        "ExpressionAttributeValues": {
                            ":one": {"N": "1"},
                            ":expected": {"N": expected},
                        },
                    }
                }
            ]
        )

    for n in range(1, 6):
        with pytest.raises(ClientError):
            bump(str(n + 1))  # the same text, a value the item does not hold
        bump(str(n))
    assert _item(client, table, "cond") == {**_key("cond"), "n": {"N": "6"}}
