"""The engine parses each expression text once and binds each request's names and values.

What is reused is only what the text decides: these tests send one text again and again with
other names and values, and check every request is still judged by its own (a condition on its
own attribute, a ``BETWEEN`` with a NULL bound refused, overlapping paths and key attributes
refused), that the text was parsed once, and that every type of value comes back as it went in.
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import Binary

from sessionstore.engine import cache as engine_cache

UPDATE = "SET #a = :v, #b = :w"
CONDITION = "(#c = :expected) AND (attribute_not_exists(#gone) OR size(#c) < :big)"


def N(text: str) -> dict[str, str]:  # a number, as DynamoDB's JSON writes it
    return {"N": text}


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "cache"}, "sk": {"S": sk}}


def _update(client: Any, table: str, sk: str, names: dict[str, str], values: dict[str, Any]) -> Any:
    return client.update_item(
        TableName=table,
        Key=_key(sk),
        UpdateExpression=UPDATE,
        ConditionExpression=CONDITION,
        ExpressionAttributeNames={**names, "#gone": "gone"},
        ExpressionAttributeValues={**values, ":big": {"N": "100"}},
        ReturnValues="ALL_NEW",
    )


def _error(caught: pytest.ExceptionInfo[Any]) -> tuple[int, str, str]:
    response = caught.value.response
    error = response["Error"]
    return response["ResponseMetadata"]["HTTPStatusCode"], error["Code"], error["Message"]


def test_one_text_is_judged_by_each_requests_own_names_and_values(client: Any, table: str) -> None:
    client.put_item(TableName=table, Item={**_key("a"), "x": {"S": "1"}, "y": {"S": "2"}})
    names = {"#a": "p", "#b": "q", "#c": "x"}
    after = _update(
        client, table, "a", names, {":v": {"S": "p1"}, ":w": {"S": "q1"}, ":expected": {"S": "1"}}
    )
    assert after["Attributes"]["p"] == {"S": "p1"}
    # the same texts: the condition now reads y (2), so expecting 1 fails ...
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        _update(
            client,
            table,
            "a",
            {**names, "#c": "y"},
            {":v": N("2"), ":w": N("3"), ":expected": {"S": "1"}},
        )
    # ... and expecting 2 passes, writing other attributes under other names
    after = _update(
        client,
        table,
        "a",
        {"#a": "r", "#b": "s", "#c": "y"},
        {":v": N("2"), ":w": N("3"), ":expected": {"S": "2"}},
    )
    assert {k: after["Attributes"][k] for k in ("p", "q", "r", "s")} == {
        "p": {"S": "p1"},
        "q": {"S": "q1"},
        "r": {"N": "2"},
        "s": {"N": "3"},
    }


def test_checks_on_the_names_run_for_each_pattern_of_names(client: Any, table: str) -> None:
    """The update's text passed once with two different names; the same text naming one path
    twice, or a key attribute, is refused as before."""
    client.put_item(TableName=table, Item={**_key("b"), "x": {"S": "1"}})
    values = {":v": N("1"), ":w": N("2"), ":expected": {"S": "1"}}
    _update(client, table, "b", {"#a": "m", "#b": "n", "#c": "x"}, values)
    with pytest.raises(client.exceptions.ClientError) as caught:
        _update(client, table, "b", {"#a": "m", "#b": "m", "#c": "x"}, values)
    status, code, message = _error(caught)
    assert (status, code) == (400, "ValidationException")
    assert "Two document paths overlap with each other" in message
    with pytest.raises(client.exceptions.ClientError) as caught:
        _update(client, table, "b", {"#a": "sk", "#b": "n", "#c": "x"}, values)
    status, code, message = _error(caught)
    assert (status, code) == (400, "ValidationException")
    assert "Cannot update attribute sk. This attribute is part of the key" in message


def test_a_null_bound_is_refused_every_time(client: Any, table: str) -> None:
    """``BETWEEN`` refuses a NULL bound when the operator is built: still so for a text that
    was parsed before with other bounds."""
    client.put_item(TableName=table, Item={**_key("c"), "n": N("5")})

    def between(low: dict[str, Any]) -> Any:
        return client.delete_item(
            TableName=table,
            Key=_key("c"),
            ConditionExpression="n BETWEEN :low AND :high",
            ExpressionAttributeValues={":low": low, ":high": N("9")},
            ReturnValues="ALL_OLD",
        )

    for _ in range(2):
        with pytest.raises(client.exceptions.ClientError) as caught:
            between({"NULL": True})
        assert _error(caught)[:2] == (400, "ValidationException")
    assert between(N("1"))["Attributes"]["n"] == N("5")


@pytest.mark.embedded_only("counts the embedded engine's own parses")
def test_each_text_is_parsed_once_however_many_requests_use_it(
    client: Any, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.dynamodb import comparisons
    from moto.dynamodb.parsing import tokens

    parsed: Counter[str] = Counter()
    lex = comparisons.ConditionExpressionParser._lex_condition_expression
    tokenize = tokens.ExpressionTokenizer.make_list.__func__  # type: ignore[attr-defined]

    def counted_lex(self: Any) -> Any:
        parsed[self.condition_expression] += 1
        return lex(self)

    def counted_tokenize(cls: Any, text: str) -> Any:
        parsed[text] += 1
        return tokenize(cls, text)

    monkeypatch.setattr(
        comparisons.ConditionExpressionParser, "_lex_condition_expression", counted_lex
    )
    monkeypatch.setattr(tokens.ExpressionTokenizer, "make_list", classmethod(counted_tokenize))
    update = "SET #t.#token = :now, #seen = :now"
    condition = "attribute_not_exists(#t.#token) AND #seen < :now"
    client.put_item(TableName=table, Item={**_key("d"), "t": {"M": {}}, "seen": N("0")})
    for i in range(1, 6):  # a fresh token name each time, as the store's requests carry
        client.update_item(
            TableName=table,
            Key=_key("d"),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames={"#t": "t", "#token": f"token-{i}", "#seen": "seen"},
            ExpressionAttributeValues={":now": N(str(i))},
        )
    item = client.get_item(TableName=table, Key=_key("d"), ConsistentRead=True)["Item"]
    assert item["seen"] == N("5") and len(item["t"]["M"]) == 5
    assert parsed[update] <= 1 and parsed[condition] <= 1, parsed  # 0: parsed by an earlier test
    assert engine_cache.CACHE_SIZE >= 100


VALUES: dict[str, Any] = {
    "s": "text ✓ \u2028",
    "n": Decimal("-12345678901234567890.123456789"),
    "big": Decimal("9.9999999999999999999999999999999999999E+125"),
    "b": Binary(b"\x00\xffbytes"),
    "ss": {"a", "b"},
    "ns": {Decimal("1"), Decimal("2.5")},
    "bs": {Binary(b"x"), Binary(b"\x01")},
    "l": ["x", Decimal("1"), None, True, [{"deep": Binary(b"\x02")}]],
    "m": {"k": {"nested": ["v", False]}, "empty": {}},
    "null": None,
    "bool": True,
    "empty": "",
}


def test_every_type_comes_back_as_it_went_in(client: Any, table: str) -> None:
    """The engine writes item results to JSON itself: every type, through every item action."""
    from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

    to_wire, from_wire = TypeSerializer().serialize, TypeDeserializer().deserialize

    def plain(item: dict[str, Any]) -> dict[str, Any]:
        return {k: from_wire(v) for k, v in item.items() if k not in ("pk", "sk")}

    item = {**_key("e"), **{k: to_wire(v) for k, v in VALUES.items()}}
    assert "Attributes" not in client.put_item(TableName=table, Item=item)
    assert plain(client.get_item(TableName=table, Key=_key("e"))["Item"]) == VALUES
    queried = client.query(
        TableName=table,
        KeyConditionExpression="pk = :p AND sk = :s",
        ExpressionAttributeValues={":p": {"S": "cache"}, ":s": {"S": "e"}},
    )
    assert [plain(i) for i in queried["Items"]] == [VALUES] and queried["Count"] == 1
    updated = client.update_item(
        TableName=table,
        Key=_key("e"),
        UpdateExpression="SET added = :b",
        ExpressionAttributeValues={":b": to_wire(Binary(b"\x03"))},
        ReturnValues="ALL_NEW",
    )
    assert plain(updated["Attributes"]) == {**VALUES, "added": Binary(b"\x03")}
    got = client.transact_get_items(TransactItems=[{"Get": {"TableName": table, "Key": _key("e")}}])
    assert plain(got["Responses"][0]["Item"]) == {**VALUES, "added": Binary(b"\x03")}
    batch = client.batch_get_item(RequestItems={table: {"Keys": [_key("e")]}})
    assert plain(batch["Responses"][table][0]) == {**VALUES, "added": Binary(b"\x03")}
    deleted = client.delete_item(TableName=table, Key=_key("e"), ReturnValues="ALL_OLD")
    assert plain(deleted["Attributes"]) == {**VALUES, "added": Binary(b"\x03")}
    assert "Item" not in client.get_item(TableName=table, Key=_key("e"), ConsistentRead=True)


def test_each_answer_carries_its_own_request_id(client: Any, table: str) -> None:
    """moto's ids, drawn at once from its seeded generator: 52 letters and digits, one each."""
    ids = [
        client.get_item(TableName=table, Key=_key("id"))["ResponseMetadata"]["RequestId"]
        for _ in range(20)
    ]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 52 and i.isalnum() and i.isascii() for i in ids)
