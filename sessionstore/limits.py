"""DynamoDB's documented limits, checked on every request before it is sent.

Layer: the bottom of the write path, under ``wire.send`` (every request passes there, built by
``conditions.Request`` or by hand). Why: the limits ("Constraints in Amazon DynamoDB": 1 KB =
1,024 bytes) are DynamoDB's, and the embedded engine fails on some of them differently; a refusal
after the fact would cost a request and blur which limit it was.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .conditions import PLACEHOLDER
from .errors import DynamoDBError, ItemOverLimit, RequestOverLimit
from .sizing import MAX_ITEM_BYTES, text_size, value_size

#: "The maximum length of any expression string is 4 KB."
MAX_EXPRESSION_BYTES = 4_096
#: "The maximum number of operators or functions allowed in an UpdateExpression is 300." (In
#: ``SET a = :val1 + :val2 + :val3`` there are two: the ``=`` of an action does not count.)
MAX_UPDATE_OPERATORS = 300

_EXPRESSIONS = (
    "UpdateExpression",
    "ConditionExpression",
    "KeyConditionExpression",
    "FilterExpression",
    "ProjectionExpression",
)
#: An operator or function of an UpdateExpression: arithmetic, ``if_not_exists``, ``list_append``
#: (no placeholder or name can hold ``+`` or ``-``: values are never literals).
_UPDATE_OPERATORS = re.compile(r"[+-]|\b(?:if_not_exists|list_append)\s*\(")


def check_limits(operation: str, request: Mapping[str, Any]) -> None:
    """Refuse a request past the limits above with ``RequestOverLimit`` (an ``InvalidInput``),
    and an item over ``sizing.MAX_ITEM_BYTES`` that it carries whole (PutItem, a transaction's
    Put) with ``ItemOverLimit`` (also an ``ItemTooLarge``). ``operation``: boto3's method name.
    Every request passes here (``wire.send``), built by ``Request`` or by hand."""
    api = _API.get(operation)
    if api is None:
        api = _API[operation] = "".join(part.title() for part in operation.split("_"))
    actions = request.get("TransactItems")
    if actions is None:
        _check_action(api, request)
        return
    for index, action in enumerate(actions):
        for kind, body in action.items():
            _check_action(f"{api} TransactItems[{index}].{kind}", body)


#: boto3's method names as the API spells them (``update_item``: ``UpdateItem``).
_API: dict[str, str] = {}

#: What an action's expressions are found to hold (``_verdict``), by their texts: they hold
#: placeholders, never values, so each kind of request sends the same few texts again and again
#: and each is scanned once. Bounded: emptied when full.
_VERDICTS: dict[tuple[str | None, ...], _Verdict] = {}
_VERDICTS_MAX = 512

#: The placeholders the expressions use, and the limit they pass, if any: (the field, its
#: figure, DynamoDB's maximum, the unit).
_Verdict = tuple[frozenset[str], tuple[str, int, int, str] | None]


def _verdict(texts: tuple[object, ...]) -> _Verdict:
    used = frozenset(PLACEHOLDER.findall(" ".join(str(t) for t in texts if t is not None)))
    for field, text in zip(_EXPRESSIONS, texts, strict=True):
        if not isinstance(text, str):
            continue
        size = text_size(text)
        if size > MAX_EXPRESSION_BYTES:
            return used, (field, size, MAX_EXPRESSION_BYTES, "bytes")
        if field == "UpdateExpression":
            count = len(_UPDATE_OPERATORS.findall(text))
            if count > MAX_UPDATE_OPERATORS:
                return used, (field, count, MAX_UPDATE_OPERATORS, "operators or functions")
    return used, None


def _check_action(where: str, body: Mapping[str, Any]) -> None:
    texts = tuple([body.get(f) for f in _EXPRESSIONS])
    try:
        verdict = _VERDICTS[texts]
    except (KeyError, TypeError):  # new, or not texts (a request built by hand): not kept
        verdict = _verdict(texts)
        if all(t is None or type(t) is str for t in texts):
            if len(_VERDICTS) >= _VERDICTS_MAX:
                _VERDICTS.clear()
            _VERDICTS[texts] = verdict
    used, over = verdict
    # A request built by hand may carry a placeholder no expression uses; DynamoDB refuses it.
    for field in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        placeholders = body.get(field) or ()
        if not used.issuperset(placeholders):
            key = next(k for k in placeholders if k not in used)
            raise DynamoDBError(
                "ValidationException", f"{where}: {field} {key} is used in no expression"
            )
    if over is not None:
        field, figure, maximum, unit = over
        raise RequestOverLimit(f"{where} {field}", figure, maximum, unit)
    item = body.get("Item")
    if isinstance(item, Mapping):
        size = _item_size(item)
        if size > MAX_ITEM_BYTES:
            raise ItemOverLimit(f"{where} Item", size, MAX_ITEM_BYTES)


def _item_size(item: Mapping[str, Any]) -> int:
    """``sizing.item_size``, its names and string values sized inline (most of an item: each
    PutItem is sized whole before it is sent)."""
    total = 0
    for name, value in item.items():
        total += len(name) if name.isascii() else len(name.encode("utf-8"))
        if "S" in value and len(value) == 1:
            text = value["S"]
            total += len(text) if text.isascii() else len(text.encode("utf-8"))
        else:
            total += value_size(value)
    return total
