"""The embedded engine checks a request's keys against the table's, as DynamoDB does first.

Layer: inside the embedded engine, under ``checks`` (which calls these from its patches of
moto's handler); both raise ``refusals.refusal``. Why: moto found a transaction's Put without its
sort key only while running it (and cancelled the transaction with a ``KeyError`` as its reason),
and it answered a Query whose key condition compares the key with a value of another type as if
nothing matched. DynamoDB refuses both before reading anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .refusals import refusal

KEY_MISMATCH = "The provided key element does not match the schema"


def check_transaction_keys(backend: Any, body: Mapping[str, Any]) -> None:
    """Each action of a transaction names its item by the table's key, before any runs (moto
    found out while running it, and cancelled the transaction with a ``KeyError``)."""
    for entry in body.get("TransactItems") or ():
        for kind, inner in entry.items():
            try:
                table = backend.get_table(inner["TableName"])
            except Exception:
                continue  # moto reports the missing table
            keys = [k for k in (table.hash_key_attr, table.range_key_attr) if k]
            if kind == "Put":
                for key in keys:
                    if key not in (inner.get("Item") or {}):
                        raise refusal(
                            f"One or more parameter values were invalid: Missing the key {key} "
                            "in the item"
                        )
            elif set(inner.get("Key") or {}) != set(keys):
                raise refusal(KEY_MISMATCH)


def check_query_key_types(backend: Any, body: Mapping[str, Any]) -> None:
    """A Query's key condition compares each key attribute with a value of its own type."""
    from moto.dynamodb.parsing.key_condition_expression import parse_expression

    text = body.get("KeyConditionExpression")
    if not isinstance(text, str):
        return
    try:
        table = backend.get_table(body["TableName"])
        schema = backend.get_schema(body["TableName"], body.get("IndexName"))
        hashes, ranges, _ = parse_expression(
            key_condition_expression=text,
            expression_attribute_values=body.get("ExpressionAttributeValues") or {},
            expression_attribute_names=body.get("ExpressionAttributeNames") or {},
            schema=schema,
        )
    except Exception:
        return  # moto reports it, as before
    types = {d["AttributeName"]: d["AttributeType"] for d in table.attr}
    compared = [(name, value) for name, value in hashes]
    compared += [(name, value) for name, operator, values in ranges for value in values]
    for name, value in compared:
        kind = next(iter(value), None) if isinstance(value, Mapping) else None
        if name in types and kind != types[name]:
            raise refusal(
                "One or more parameter values were invalid: Condition parameter type does not "
                "match schema type"
            )
