"""moto's copy of a result (``dynamo_to_dict``), made cheaper for plain values, is the same copy.

``engine.results.plain`` copies dicts, lists, text and numbers itself and leaves every other
value -- moto's model objects, a dict of another class, a date -- to moto's own function.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sessionstore.engine import results as engine_results


def _ordered(value: Any) -> Any:
    if isinstance(value, dict):
        return [(type(value).__name__, k, _ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [type(value).__name__, *(_ordered(v) for v in value)]
    return (type(value).__name__, value)


def test_the_copy_is_motos_own() -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType, Item, LimitedSizeDict
    from moto.dynamodb.models.utilities import dynamo_to_dict

    item = Item(
        DynamoType({"S": "k"}),
        None,
        {"pk": {"S": "k"}, "b": {"B": "YWJj"}, "l": {"L": [{"N": "1"}, {"M": {"x": {"S": "y"}}}]}},
    )
    limited = LimitedSizeDict()
    dict.__setitem__(limited, "v", DynamoType({"BS": ["YQ=="]}))
    result = {
        "Attributes": item.to_json()["Attributes"],
        "Items": [{"n": DynamoType({"N": "2"}), "t": True, "none": None, "f": 1.5}],
        "Item": item,
        "Limited": limited,
        "When": datetime(2026, 1, 1, 12, 0),
        "Count": 3,
        "Raw": b"bytes",
    }
    copied = engine_results.plain(dynamo_to_dict)(result)
    assert _ordered(copied) == _ordered(dynamo_to_dict(result))
    assert copied["Items"][0]["n"] == {"N": "2"}  # a model object inside a plain list: moto's


def test_the_engine_copies_results_so(engine: Any) -> None:
    from moto.dynamodb import responses

    from sessionstore.local import LocalDynamoDB

    if isinstance(engine, LocalDynamoDB):
        assert responses.dynamo_to_dict.__qualname__.startswith("plain.")  # type: ignore[attr-defined]
