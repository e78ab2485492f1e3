"""Conditions and updates as values, and the one builder that mints every placeholder.

Layer: the bottom of the write path; no I/O. Why: a condition is the lesson of every pattern, so
it has to be a thing a notebook can print whole, or clause by clause, not an f-string buried in a
request. As in boto3's ``conditions.py``, a condition is a value: named clauses
(``locking.version_is``, ``lifecycle.alive``, ``write_tokens.token_absent`` ...) composed with
``&``, ``|`` and ``~``. ``str()`` shows it with its values in place; ``Request`` renders it with
placeholders, minting exactly those it uses (DynamoDB refuses an unused one, and many of our
attribute names -- ``status``, ``ttl``, ``owner`` -- are reserved words).

An update is a value too: ``SET`` and ``REMOVE`` actions added with ``+``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from boto3.dynamodb.types import TypeSerializer

__all__ = [
    "TRUE",
    "Clause",
    "Condition",
    "Field",
    "Name",
    "Request",
    "Update",
    "Value",
    "absent",
    "assign",
    "clause",
    "equals",
    "exists",
    "item_to_wire",
    "put_item",
    "readable",
    "remove",
    "set_",
    "to_wire",
    "update_item",
]

_SERIALIZER = TypeSerializer()


def to_wire(value: Any) -> dict[str, Any]:
    """A Python value as a DynamoDB attribute value."""
    return dict(_SERIALIZER.serialize(value))


def item_to_wire(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: to_wire(v) for k, v in item.items()}


# ---------------------------------------------------------------------------- operands


class Field(StrEnum):
    """The attribute names of one kind of item, each named once (``item.Meta`` ...): a ``str``
    everywhere, shown as its plain text."""

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, slots=True)
class Name:
    """An attribute of the item by its name: ``#name``; ``key``: an entry of that map attribute
    (``tk.<token>``); ``free``: a name chosen by the caller (an attribute name), minted as
    ``#k<n>`` so it can never collide with ours."""

    name: str
    key: str | None = None
    free: bool = False

    def __str__(self) -> str:
        return str(self.name) if self.key is None else f"{self.name}.{self.key}"


@dataclass(frozen=True, slots=True)
class Value:
    value: Any

    def __str__(self) -> str:
        return repr(self.value)


Operand = Name | Value


@dataclass(frozen=True, slots=True)
class Clause:
    """One named piece of an expression: ``text`` with ``{}`` where each operand goes."""

    label: str
    text: str
    operands: tuple[Operand, ...] = ()

    def render(self, request: Request) -> str:
        return self.text.format(*(request.mint(o) for o in self.operands))

    def __str__(self) -> str:
        return self.text.format(*map(str, self.operands))


# ---------------------------------------------------------------------------- conditions


class Condition:
    """A condition expression as a value. ``&`` / ``|`` / ``~`` compose; ``TRUE`` is the empty
    condition (no ``ConditionExpression`` is sent)."""

    def render(self, request: Request) -> str:
        raise NotImplementedError

    def clauses(self) -> tuple[Clause, ...]:
        """The named clauses, in order (for a notebook to print)."""
        return ()

    def __and__(self, other: Condition) -> Condition:
        parts = [p for p in Joined.flat("AND", self, other) if p is not TRUE]
        return TRUE if not parts else parts[0] if len(parts) == 1 else Joined("AND", tuple(parts))

    def __or__(self, other: Condition) -> Condition:
        return Joined("OR", Joined.flat("OR", self, other))

    def __invert__(self) -> Condition:
        return Not(self)


class _True(Condition):
    def render(self, request: Request) -> str:
        return ""

    def __str__(self) -> str:
        return "(none)"


TRUE: Condition = _True()


@dataclass(frozen=True, slots=True)
class Is(Condition):
    """A condition of one clause."""

    clause: Clause

    def render(self, request: Request) -> str:
        return self.clause.render(request)

    def clauses(self) -> tuple[Clause, ...]:
        return (self.clause,)

    def __str__(self) -> str:
        return str(self.clause)


@dataclass(frozen=True, slots=True)
class Joined(Condition):
    """Conditions joined by ``word``: ``AND`` (``&``) or ``OR`` (``|``)."""

    word: str
    parts: tuple[Condition, ...]

    @staticmethod
    def flat(word: str, *conditions: Condition) -> tuple[Condition, ...]:
        """``conditions``, those joined by the same word spread out: ``a & (b & c)`` is one AND."""
        return tuple(
            p
            for c in conditions
            for p in (c.parts if isinstance(c, Joined) and c.word == word else (c,))
        )

    def render(self, request: Request) -> str:
        return f" {self.word} ".join(f"({p.render(request)})" for p in self.parts)

    def clauses(self) -> tuple[Clause, ...]:
        return tuple(c for p in self.parts for c in p.clauses())

    def __str__(self) -> str:
        return f" {self.word} ".join(f"({p})" for p in self.parts)


@dataclass(frozen=True, slots=True)
class Not(Condition):
    part: Condition

    def render(self, request: Request) -> str:
        return f"NOT ({self.part.render(request)})"

    def clauses(self) -> tuple[Clause, ...]:
        return self.part.clauses()

    def __str__(self) -> str:
        return f"NOT ({self.part})"


def clause(label: str, text: str, *operands: Operand) -> Condition:
    """A named clause as a condition: ``clause("version_is", "{} = {}", Name("version"),
    Value(3))``."""
    return Is(Clause(label, text, operands))


def exists(name: str = "pk") -> Condition:
    return clause("exists", "attribute_exists({})", Name(name))


def absent(name: str = "pk") -> Condition:
    return clause("absent", "attribute_not_exists({})", Name(name))


def equals(name: str, value: Any) -> Condition:
    return clause(f"{name}_is", "{} = {}", Name(name), Value(value))


# ---------------------------------------------------------------------------- updates


@dataclass(frozen=True, slots=True)
class Update:
    """``SET`` and ``REMOVE`` actions; ``+`` joins two updates."""

    sets: tuple[Clause, ...] = ()
    removes: tuple[Name, ...] = ()

    def __add__(self, other: Update) -> Update:
        return Update(self.sets + other.sets, self.removes + other.removes)

    def render(self, request: Request) -> str:
        text = "SET " + ", ".join(s.render(request) for s in self.sets) if self.sets else ""
        if self.removes:
            dropped = ", ".join(request.mint(r) for r in self.removes)
            text = f"{text} REMOVE {dropped}" if text else f"REMOVE {dropped}"
        return text

    def __str__(self) -> str:
        text = "SET " + ", ".join(map(str, self.sets)) if self.sets else ""
        if self.removes:
            text += (" " if text else "") + "REMOVE " + ", ".join(map(str, self.removes))
        return text


def set_(label: str, text: str, *operands: Operand) -> Update:
    """One SET action: ``set_("version_up", "{} = {} + {}", v, v, Value(1))``."""
    return Update(sets=(Clause(label, text, operands),))


def assign(name: str, value: Any) -> Update:
    return set_(name, "{} = {}", Name(name), Value(value))


def remove(*names: Name) -> Update:
    return Update(removes=names)


# ---------------------------------------------------------------------------- the builder


class Request:
    """One request's placeholders: each operand rendered is minted here, and only those."""

    __slots__ = ("names", "values")

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def mint(self, operand: Operand) -> str:
        if isinstance(operand, Value):
            placeholder = f":v{len(self.values)}"
            self.values[placeholder] = to_wire(operand.value)
            return placeholder
        if operand.free:
            return self._free(operand.name)
        placeholder = f"#{operand.name}"
        self.names[placeholder] = str(operand.name)  # the plain text of a field's StrEnum
        if operand.key is None:
            return placeholder
        return f"{placeholder}.{self._free(operand.key)}"

    def _free(self, name: str) -> str:
        for placeholder, known in self.names.items():  # one placeholder per name
            if known == name and placeholder.startswith("#k"):
                return placeholder
        placeholder = f"#k{len(self.names)}"
        self.names[placeholder] = str(name)
        return placeholder

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.names:
            out["ExpressionAttributeNames"] = dict(self.names)
        if self.values:
            out["ExpressionAttributeValues"] = dict(self.values)
        return out


#: A ``#name`` or ``:value`` placeholder as an expression uses it.
PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")


def readable(request: Mapping[str, Any], field: str) -> str:
    """An expression of a request as DynamoDB reads it: each placeholder replaced by the name
    or the value it stands for (``#tk.#k3`` by ``tk.t-0007``, ``:v0`` by ``1767268800``)."""
    names = request.get("ExpressionAttributeNames") or {}
    values = request.get("ExpressionAttributeValues") or {}

    def value(placeholder: str) -> str:
        if placeholder in names:
            return str(names[placeholder])
        ((kind, raw),) = values[placeholder].items()
        return str(raw) if kind == "N" else repr(raw)

    return PLACEHOLDER.sub(lambda m: value(m.group(0)), str(request.get(field, "")))


def update_item(
    table: str,
    key: Mapping[str, Any],
    update: Update,
    condition: Condition,
    *,
    returns: str | None = "ALL_NEW",
) -> dict[str, Any]:
    """An UpdateItem that returns the item (``returns``), and ALL_OLD when refused."""
    r = Request()
    request: dict[str, Any] = {"TableName": table, "Key": dict(key)}
    request["UpdateExpression"] = update.render(r)
    text = condition.render(r)
    if text:
        request["ConditionExpression"] = text
    if returns is not None:
        request["ReturnValues"] = returns
    return {**request, "ReturnValuesOnConditionCheckFailure": "ALL_OLD", **r.params()}


def put_item(
    table: str, item: Mapping[str, Any], condition: Condition = TRUE, *, old: bool = True
) -> dict[str, Any]:
    """A PutItem of ``item`` (wire form) on ``condition``; ALL_OLD when refused."""
    r = Request()
    request: dict[str, Any] = {"TableName": table, "Item": dict(item)}
    text = condition.render(r)
    if text:
        request["ConditionExpression"] = text
    if old and text:
        request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {**request, **r.params()}


def check(table: str, key: Mapping[str, Any], condition: Condition) -> dict[str, Any]:
    """A transaction's ConditionCheck; ALL_OLD when refused."""
    r = Request()
    body = {"TableName": table, "Key": dict(key), "ConditionExpression": condition.render(r)}
    return {**body, "ReturnValuesOnConditionCheckFailure": "ALL_OLD", **r.params()}
