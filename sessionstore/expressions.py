"""Building expressions, apart from sending them.

DynamoDB rejects a request whose ``ExpressionAttributeNames`` or ``Values`` hold an unused entry,
and many of our attribute names (``status``, ``ttl``, ``owner``...) are reserved words, so every
name goes through a placeholder and only the placeholders actually used are sent.
"""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.types import TypeSerializer

_SERIALIZER = TypeSerializer()


def to_wire(value: Any) -> dict[str, Any]:
    """A Python value as a DynamoDB attribute value. Strings, ints, bools and lists of them --
    nearly everything the store sends -- skip boto3's general-purpose serializer, which is the
    largest single cost of building a request."""
    kind = type(value)
    if kind is str:
        return {"S": value}
    if kind is int and -(10**38) < value < 10**38:
        return {"N": str(value)}
    if kind is bool:
        return {"BOOL": value}
    if kind is list:
        return {"L": [to_wire(v) for v in value]}
    if kind is dict:
        return {"M": {k: to_wire(v) for k, v in value.items()}}
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
    """The session item exists, has not expired and belongs to ``owner`` (or to nobody)."""
    owner_cond = (
        f"attribute_not_exists({e.n('owner')})"
        if owner is None
        else f"{e.n('owner')} = {e.v(owner)}"
    )
    return all_of(f"attribute_exists({e.n('pk')})", f"{e.n('ttl')} > {e.v(now_s)}", owner_cond)


#: ``live_session`` written out for requests whose fixed text is not rebuilt on every call:
#: names ``#pk``, ``#ttl``, ``#owner``; values ``:nows`` (now, epoch seconds) and ``:owner``.
LIVE_OWNED = "(attribute_exists(#pk)) AND (#ttl > :nows) AND (#owner = :owner)"
LIVE_UNOWNED = "(attribute_exists(#pk)) AND (#ttl > :nows) AND (attribute_not_exists(#owner))"


def status_in(e: Expr, statuses: list[str]) -> str:
    if len(statuses) == 1:
        return f"{e.n('status')} = {e.v(statuses[0])}"
    return f"{e.n('status')} IN ({', '.join(e.v(s) for s in statuses)})"
