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
from .sizing import MAX_ITEM_BYTES, item_size, text_size

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
    api = "".join(part.title() for part in operation.split("_"))
    actions = request.get("TransactItems")
    if actions is None:
        _check_action(api, request)
        return
    for index, action in enumerate(actions):
        for kind, body in action.items():
            _check_action(f"{api} TransactItems[{index}].{kind}", body)


def _check_action(where: str, body: Mapping[str, Any]) -> None:
    # A request built by hand may carry a placeholder no expression uses; DynamoDB refuses it.
    used = set(PLACEHOLDER.findall(" ".join(str(body.get(f, "")) for f in _EXPRESSIONS)))
    for field in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        for key in set(body.get(field) or ()) - used:
            raise DynamoDBError(
                "ValidationException", f"{where}: {field} {key} is used in no expression"
            )
    for field in _EXPRESSIONS:
        text = body.get(field)
        if not isinstance(text, str):
            continue
        size = text_size(text)
        if size > MAX_EXPRESSION_BYTES:
            raise RequestOverLimit(f"{where} {field}", size, MAX_EXPRESSION_BYTES)
        if field == "UpdateExpression":
            count = len(_UPDATE_OPERATORS.findall(text))
            if count > MAX_UPDATE_OPERATORS:
                raise RequestOverLimit(
                    f"{where} {field}", count, MAX_UPDATE_OPERATORS, "operators or functions"
                )
    item = body.get("Item")
    if isinstance(item, Mapping):
        size = item_size(item)
        if size > MAX_ITEM_BYTES:
            raise ItemOverLimit(f"{where} Item", size, MAX_ITEM_BYTES)
