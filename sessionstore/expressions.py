"""Building expressions, apart from sending them -- and checking a request against DynamoDB's
documented limits before it is sent (``check_limits``).

DynamoDB rejects a request whose ``ExpressionAttributeNames`` or ``Values`` hold an unused entry,
and many of our attribute names (``status``, ``ttl``, ``owner``...) are reserved words, so every
name goes through a placeholder and only the placeholders actually used are sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from boto3.dynamodb.types import TypeSerializer

from .errors import DynamoDBError, ItemOverLimit, RequestOverLimit
from .sizing import MAX_ITEM_BYTES, item_size, text_size

_SERIALIZER = TypeSerializer()


def to_wire(value: Any) -> dict[str, Any]:
    """A Python value as a DynamoDB attribute value."""
    return dict(_SERIALIZER.serialize(value))


class Expr:
    """Collects ``#name`` and ``:value`` placeholders for one request."""

    __slots__ = ("names", "values")

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def n(self, attribute: str) -> str:
        placeholder = "#" + attribute
        self.names[placeholder] = attribute
        return placeholder

    def k(self, name: str) -> str:
        """A placeholder for an arbitrary name (a map key: a token, an attribute name)."""
        placeholder = f"#k{len(self.names)}"
        self.names[placeholder] = name
        return placeholder

    def v(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = to_wire(value)
        return placeholder

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.names:
            out["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            out["ExpressionAttributeValues"] = dict(self.values)
        return out


def all_of(*conditions: str) -> str:
    return " AND ".join(f"({c})" for c in conditions if c)


def live_session(e: Expr, *, owner: str | None, now_s: int) -> str:
    """The session item exists, has not expired -- neither its cap ``ttl`` nor its idle
    deadline ``idleUntil`` has passed -- and belongs to ``owner`` (or to nobody)."""
    owner_cond = (
        f"attribute_not_exists({e.n('owner')})"
        if owner is None
        else f"{e.n('owner')} = {e.v(owner)}"
    )
    now = e.v(now_s)
    return all_of(
        f"attribute_exists({e.n('pk')})",
        f"{e.n('ttl')} > {now}",
        f"{e.n('idleUntil')} > {now}",
        owner_cond,
    )


def extend_idle(e: Expr, now_s: int) -> tuple[str, str]:
    """``(SET actions, condition)`` that move the idle deadline on: ``idleUntil = idle + :now``,
    so the writer needs to know neither the idle period nor the cap, and ``idleFrom = :now``,
    the time it counts from. The deadline may pass ``ttl``: readers take the earlier
    (``Session.expires_at``). A fixed-ttl session's ``idle`` is its whole ttl, so one formula
    serves both.

    The condition keeps the deadline from moving backwards: a writer whose clock lags behind
    the last one's (``idleFrom`` later than its ``:now``) is refused, and sends its write again
    without moving the deadline (``idle_ahead``). Clocks a second apart rarely meet it."""
    now = e.v(now_s)
    idle_from = e.n("idleFrom")
    sets = f"{e.n('idleUntil')} = {e.n('idle')} + {now}, {idle_from} = {now}"
    return sets, f"NOT ({idle_from} > {now})"


def idle_ahead(item: Mapping[str, Any] | None, now_s: int) -> bool:
    """The item's idle deadline counts from later than ``now_s``: moving it would shorten it."""
    return item is not None and int(item.get("idleFrom", 0)) > now_s


# ---------------------------------------------------------------------------- limits
#
# DynamoDB's documented limits ("Constraints in Amazon DynamoDB", developer guide, "Expression
# parameters"; 1 KB = 1,024 bytes there). A request past one is refused before it is sent: the
# embedded engine fails on some of them differently (a 500), and a refusal after the fact would
# cost a request and blur which limit it was.

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
#: A ``#name`` or ``:value`` placeholder as an expression uses it (``Expr`` mints them).
_PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")
_UPDATE_OPERATORS = re.compile(r"[+-]|\b(?:if_not_exists|list_append)\s*\(")


def check_limits(operation: str, request: Mapping[str, Any]) -> None:
    """Refuse a request past the limits above with ``RequestOverLimit`` (an ``InvalidInput``),
    and an item over ``sizing.MAX_ITEM_BYTES`` that it carries whole (PutItem, a transaction's
    Put) with ``ItemOverLimit`` (also an ``ItemTooLarge``). ``operation``: boto3's method name."""
    api = "".join(part.title() for part in operation.split("_"))
    actions = request.get("TransactItems")
    if actions is None:
        _check_action(api, request)
        return
    for index, action in enumerate(actions):
        for kind, body in action.items():
            _check_action(f"{api} TransactItems[{index}].{kind}", body)


def _check_action(where: str, body: Mapping[str, Any]) -> None:
    # DynamoDB refuses a placeholder no expression uses (the embedded engine does not check).
    used = set(_PLACEHOLDER.findall(" ".join(str(body.get(f, "")) for f in _EXPRESSIONS)))
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
