"""Conditions and updates as values, and the one builder that mints every placeholder.

Layer: the bottom of the write path; no I/O. Why: a condition is the lesson of every pattern, so
it has to be a thing a notebook can print whole, or clause by clause, not an f-string buried in a
request. As in boto3's ``conditions.py``, a condition is a value: named clauses
(``locking.version_is``, ``item.alive``, ``write_tokens.token_absent`` ...) composed with
``&``, ``|`` and ``~``. ``str()`` shows it with its values in place; ``Request`` renders it with
placeholders, minting exactly those it uses (DynamoDB refuses an unused one, and many of our
attribute names -- ``status``, ``ttl``, ``owner`` -- are reserved words).

An update is a value too: ``SET`` and ``REMOVE`` actions added with ``+``.

Every write sends one of a few kinds of request, each time with other values, so the patterns
build their clauses once, as *prototypes* with stand-in values, and a request carries a
``Bound``: a prototype with that request's values (and free names) to put in it. ``update_item``,
``put_item`` and ``check`` render a value or a ``Bound`` alike; ``Bound.build`` makes the value
it stands for (what a notebook prints). Rendering goes by *shape* -- a value's texts and names
without its values and free names, which a request's placeholders never show -- so each shape is
rendered once (``_Template``) and each request after that only converts its values.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from itertools import chain
from typing import Any, Generic, NamedTuple, TypeVar

from boto3.dynamodb.types import TypeSerializer

_SERIALIZER = TypeSerializer()

#: The ints whose ``N`` is their decimal text: ``TypeSerializer`` refuses more digits than 38.
_EXACT = 10**38


def to_wire(value: Any) -> dict[str, Any]:
    """A Python value as a DynamoDB attribute value, as ``TypeSerializer`` makes it; a plain
    ``str`` or ``int`` (nearly every value a request carries) without its type dispatch."""
    kind = type(value)
    if kind is str:
        return {"S": value}
    if kind is int and -_EXACT < value < _EXACT:
        return {"N": str(value)}
    return dict(_SERIALIZER.serialize(value))


def item_to_wire(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: to_wire(v) for k, v in item.items()}


# ---------------------------------------------------------------------------- shapes
#
# A value's shape: (how it renders -- a key: its texts and names, and where its values and free
# names go --, its values, its free names), both in the order ``Request`` mints them. Worked out
# on first use and kept: a value never changes.

_Shape = tuple[Any, tuple[Any, ...], tuple[str, ...]]
#: The shape of a value that cannot tell how it renders (a condition class of someone else's):
#: rendered by ``Request`` every time.
_OPAQUE: _Shape = ((), (), ())


class _Shaped:
    """A value whose shape is kept once worked out (``_shape``: None until then)."""

    __slots__ = ("_shape",)
    _shape: _Shape | None

    def _shaped(self) -> _Shape:
        try:
            shape = self._shape
        except AttributeError:  # a copy made without ``__init__`` (``copy``, ``pickle``)
            shape = None
        if shape is None:
            shape = self._make_shape()
            _SET_SHAPE(self, shape)
        return shape

    def _make_shape(self) -> _Shape:
        return _OPAQUE

    def _rebuilt(self, values: Iterator[Any], names: Iterator[str]) -> Any:
        """The same value with the next of ``values`` and ``names`` in place of its own."""
        return self


def _setters(cls: type, *slots: str) -> tuple[Callable[[Any, Any], None], ...]:
    """Setters of ``cls``'s slots, past the frozen classes' ``__setattr__`` (for ``__init__``)."""
    return tuple(vars(cls)[slot].__set__ for slot in slots)


(_SET_SHAPE,) = _setters(_Shaped, "_shape")
_chain = chain.from_iterable


def _joined(marker: int, extra: tuple[Any, ...], items: tuple[_Shaped, ...]) -> _Shape:
    shapes = [item._shaped() for item in items]
    if _OPAQUE in shapes:
        return _OPAQUE
    key = (marker, *extra, *[s[0] for s in shapes])
    return key, tuple(_chain([s[1] for s in shapes])), tuple(_chain([s[2] for s in shapes]))


# ---------------------------------------------------------------------------- operands


class Field(StrEnum):
    """The attribute names of one kind of item, each named once (``item.Meta`` ...): a ``str``
    everywhere, shown as its plain text."""

    __repr__ = str.__repr__  # its text quoted, as ``repr(self.value)``: in C, for whole items


# The values below are frozen dataclasses with an ``__init__`` of their own that fills their
# slots directly: the generated one goes through ``object.__setattr__`` for every field.


@dataclass(frozen=True, slots=True, init=False)
class Name(_Shaped):
    """An attribute of the item by its name: ``#name``; ``key``: an entry of that map attribute
    (``tk.<token>``); ``free``: a name chosen by the caller (an attribute name), minted as
    ``#k<n>`` so it can never collide with ours. A key and a free name are *free names*: a
    ``Bound`` gives its own."""

    name: str
    key: str | None = None
    free: bool = False

    def __init__(self, name: str, key: str | None = None, free: bool = False) -> None:
        _NAME_NAME(self, name)
        _NAME_KEY(self, key)
        _NAME_FREE(self, free)
        _SET_SHAPE(self, None)

    def _make_shape(self) -> _Shape:
        # How it renders: 1 for a free name, our name (a 1-tuple of it: with a free key).
        if self.free:
            return 1, (), (str(self.name),)
        if self.key is None:
            return str(self.name), (), ()
        return (str(self.name),), (), (str(self.key),)

    def _rebuilt(self, values: Iterator[Any], names: Iterator[str]) -> Name:
        if self.free:
            return Name(next(names), free=True)
        return self if self.key is None else Name(self.name, next(names))

    def __str__(self) -> str:
        return str(self.name) if self.key is None else f"{self.name}.{self.key}"


_NAME_NAME, _NAME_KEY, _NAME_FREE = _setters(Name, "name", "key", "free")


@dataclass(frozen=True, slots=True, init=False)
class Value:
    value: Any

    def __init__(self, value: Any) -> None:
        _VALUE_VALUE(self, value)

    def __str__(self) -> str:
        return repr(self.value)


(_VALUE_VALUE,) = _setters(Value, "value")

Operand = Name | Value


@dataclass(frozen=True, slots=True, init=False)
class Clause(_Shaped):
    """One named piece of an expression: ``text`` with ``{}`` where each operand goes."""

    label: str
    text: str
    operands: tuple[Operand, ...] = ()

    def __init__(self, label: str, text: str, operands: tuple[Operand, ...] = ()) -> None:
        _CLAUSE_LABEL(self, label)
        _CLAUSE_TEXT(self, text)
        _CLAUSE_OPERANDS(self, operands)
        _SET_SHAPE(self, None)

    def _make_shape(self) -> _Shape:
        key: list[Any] = [self.text]  # then per operand: 0 for a value, how a name renders
        values: list[Any] = []
        frees: list[str] = []
        for operand in self.operands:
            if isinstance(operand, Value):
                key.append(0)
                values.append(operand.value)
            elif isinstance(operand, Name):
                how, _, free = operand._shaped()
                key.append(how)
                frees += free
            else:
                return _OPAQUE
        return tuple(key), tuple(values), tuple(frees)

    def _rebuilt(self, values: Iterator[Any], names: Iterator[str]) -> Clause:
        operands = tuple(
            Value(next(values)) if isinstance(o, Value) else o._rebuilt(values, names)
            for o in self.operands
        )
        return Clause(self.label, self.text, operands)

    def render(self, request: Request) -> str:
        return self.text.format(*[request.mint(o) for o in self.operands])

    def __str__(self) -> str:
        return self.text.format(*map(str, self.operands))


_CLAUSE_LABEL, _CLAUSE_TEXT, _CLAUSE_OPERANDS = _setters(Clause, "label", "text", "operands")


# ---------------------------------------------------------------------------- conditions


class Condition(_Shaped):
    """A condition expression as a value. ``&`` / ``|`` / ``~`` compose; ``TRUE`` is the empty
    condition (no ``ConditionExpression`` is sent)."""

    __slots__ = ()

    def render(self, request: Request) -> str:
        raise NotImplementedError

    def clauses(self) -> tuple[Clause, ...]:
        """The named clauses, in order (for a notebook to print)."""
        return ()

    def __and__(self, other: Condition) -> Condition:
        return all_of(self, other)

    def __or__(self, other: Condition) -> Condition:
        parts = [p for c in (self, other) for p in (c.parts if isinstance(c, Either) else (c,))]
        return Either(tuple(parts))

    def __invert__(self) -> Condition:
        return Not(self)


class _True(Condition):
    __slots__ = ()

    def __init__(self) -> None:
        _SET_SHAPE(self, ((4,), (), ()))

    def render(self, request: Request) -> str:
        return ""

    def __str__(self) -> str:
        return "(none)"


TRUE: Condition = _True()


@dataclass(frozen=True, slots=True, init=False)
class Is(Condition):
    """A condition of one clause."""

    clause: Clause

    def __init__(self, clause: Clause) -> None:
        _IS_CLAUSE(self, clause)
        _SET_SHAPE(self, None)

    def _make_shape(self) -> _Shape:
        return self.clause._shaped()

    def _rebuilt(self, values: Iterator[Any], names: Iterator[str]) -> Is:
        return Is(self.clause._rebuilt(values, names))

    def render(self, request: Request) -> str:
        return self.clause.render(request)

    def clauses(self) -> tuple[Clause, ...]:
        return (self.clause,)

    def __str__(self) -> str:
        return str(self.clause)


(_IS_CLAUSE,) = _setters(Is, "clause")


@dataclass(frozen=True, slots=True, init=False)
class All(Condition):
    parts: tuple[Condition, ...]

    def __init__(self, parts: tuple[Condition, ...]) -> None:
        _ALL_PARTS(self, parts)
        _SET_SHAPE(self, None)

    def _make_shape(self) -> _Shape:
        return _joined(1, (), self.parts)

    def _rebuilt(self, values: Iterator[Any], names: Iterator[str]) -> All:
        return All(tuple(p._rebuilt(values, names) for p in self.parts))

    def render(self, request: Request) -> str:
        return " AND ".join([f"({p.render(request)})" for p in self.parts])

    def clauses(self) -> tuple[Clause, ...]:
        return tuple(c for p in self.parts for c in p.clauses())

    def __str__(self) -> str:
        return " AND ".join(f"({p})" for p in self.parts)


(_ALL_PARTS,) = _setters(All, "parts")


@dataclass(frozen=True, slots=True, init=False)
class Either(Condition):
    parts: tuple[Condition, ...]

    def __init__(self, parts: tuple[Condition, ...]) -> None:
        _EITHER_PARTS(self, parts)
        _SET_SHAPE(self, None)

    def _make_shape(self) -> _Shape:
        return _joined(2, (), self.parts)

    def _rebuilt(self, values: Iterator[Any], names: Iterator[str]) -> Either:
        return Either(tuple(p._rebuilt(values, names) for p in self.parts))

    def render(self, request: Request) -> str:
        return " OR ".join([f"({p.render(request)})" for p in self.parts])

    def clauses(self) -> tuple[Clause, ...]:
        return tuple(c for p in self.parts for c in p.clauses())

    def __str__(self) -> str:
        return " OR ".join(f"({p})" for p in self.parts)


(_EITHER_PARTS,) = _setters(Either, "parts")


@dataclass(frozen=True, slots=True, init=False)
class Not(Condition):
    part: Condition

    def __init__(self, part: Condition) -> None:
        _NOT_PART(self, part)
        _SET_SHAPE(self, None)

    def _make_shape(self) -> _Shape:
        return _joined(3, (), (self.part,))

    def _rebuilt(self, values: Iterator[Any], names: Iterator[str]) -> Not:
        return Not(self.part._rebuilt(values, names))

    def render(self, request: Request) -> str:
        return f"NOT ({self.part.render(request)})"

    def clauses(self) -> tuple[Clause, ...]:
        return self.part.clauses()

    def __str__(self) -> str:
        return f"NOT ({self.part})"


(_NOT_PART,) = _setters(Not, "part")


def all_of(*conditions: Condition) -> Condition:
    """``a & b & c ...`` as one value (one ``All``, not one per ``&``)."""
    parts = [
        p for c in conditions for p in (c.parts if isinstance(c, All) else (c,)) if p is not TRUE
    ]
    return TRUE if not parts else parts[0] if len(parts) == 1 else All(tuple(parts))


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


@dataclass(frozen=True, slots=True, init=False)
class Update(_Shaped):
    """``SET`` and ``REMOVE`` actions; ``+`` joins two updates."""

    sets: tuple[Clause, ...] = ()
    removes: tuple[Name, ...] = ()

    def __init__(self, sets: tuple[Clause, ...] = (), removes: tuple[Name, ...] = ()) -> None:
        _UPDATE_SETS(self, sets)
        _UPDATE_REMOVES(self, removes)
        _SET_SHAPE(self, None)

    def __add__(self, other: Update) -> Update:
        return Update(self.sets + other.sets, self.removes + other.removes)

    def _make_shape(self) -> _Shape:
        return _joined(5, (len(self.sets),), (*self.sets, *self.removes))

    def _rebuilt(self, values: Iterator[Any], names: Iterator[str]) -> Update:
        sets = tuple(s._rebuilt(values, names) for s in self.sets)
        return Update(sets, tuple(r._rebuilt(values, names) for r in self.removes))

    def render(self, request: Request) -> str:
        text = "SET " + ", ".join([s.render(request) for s in self.sets]) if self.sets else ""
        if self.removes:
            dropped = ", ".join([request.mint(r) for r in self.removes])
            text = f"{text} REMOVE {dropped}" if text else f"REMOVE {dropped}"
        return text

    def __str__(self) -> str:
        text = "SET " + ", ".join(map(str, self.sets)) if self.sets else ""
        if self.removes:
            text += (" " if text else "") + "REMOVE " + ", ".join(map(str, self.removes))
        return text


_UPDATE_SETS, _UPDATE_REMOVES = _setters(Update, "sets", "removes")


def joined(*updates: Update) -> Update:
    """``a + b + c ...`` as one value."""
    return Update(
        tuple(s for u in updates for s in u.sets), tuple(r for u in updates for r in u.removes)
    )


def set_(label: str, text: str, *operands: Operand) -> Update:
    """One SET action: ``set_("version_up", "{} = {} + {}", v, v, Value(1))``."""
    return Update(sets=(Clause(label, text, operands),))


def assign(name: str, value: Any) -> Update:
    return set_(name, "{} = {}", Name(name), Value(value))


def remove(*names: Name) -> Update:
    return Update(removes=names)


# ---------------------------------------------------------------------------- bound prototypes

V = TypeVar("V", bound=_Shaped)


class Bound(NamedTuple, Generic[V]):
    """``prototype`` -- a condition, update or clause a pattern builds once, with stand-in
    values and free names -- with a request's ``values`` and free ``names`` to put in it, each
    in order (``str()`` of the prototype shows the values' order; ``Name`` says which names are
    free). It stands for ``build()``, the value itself, and is sent without building it."""

    prototype: V
    values: tuple[Any, ...] = ()
    names: tuple[str, ...] = ()

    def build(self) -> V:
        """The value this stands for: the prototype with these values and names in it."""
        values, names = iter(self.values), iter(self.names)
        built: V = self.prototype._rebuilt(values, names)
        if next(values, _END) is not _END or next(names, _END) is not _END:
            raise ValueError(f"more values or names than {self.prototype} takes")
        return built

    def __str__(self) -> str:
        return str(self.build())


_END = object()


def fixed(value: V) -> Bound[V]:
    """``value`` as it is, as a ``Bound``."""
    _, values, names = value._shaped()
    return Bound(value, values, names)


def named(prototype: V, *names: str) -> Bound[V]:
    """``prototype`` with its own values and these free names."""
    return Bound(prototype, prototype._shaped()[1], names)


#: Composites of prototypes (``all_bound``, ``joined_bound``), by their parts' identities: (the
#: parts -- held, so an identity stays theirs while it is here --, the composite, and for an
#: update the order of the parts' names in it, or None). Bounded: emptied when full (prototypes
#: are a pattern's constants: a few dozen).
_COMPOSITES: dict[tuple[int, ...], tuple[Any, ...]] = {}
_COMPOSITES_MAX = 1024


def _keep(key: tuple[int, ...], entry: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(_COMPOSITES) >= _COMPOSITES_MAX:
        _COMPOSITES.clear()
    _COMPOSITES[key] = entry
    return entry


def all_bound(*parts: Bound[Condition]) -> Bound[Condition]:
    """``all_of`` of what ``parts`` stand for, as a ``Bound`` (its prototype built once)."""
    key = (1, *[id(p.prototype) for p in parts])
    entry = _COMPOSITES.get(key)
    if entry is None:
        prototypes = tuple(p.prototype for p in parts)
        entry = _keep(key, (prototypes, all_of(*prototypes)))
    values = tuple(_chain([p.values for p in parts]))
    return Bound(entry[1], values, tuple(_chain([p.names for p in parts])))


def joined_bound(*parts: Bound[Update]) -> Bound[Update]:
    """``joined`` of what ``parts`` stand for, as a ``Bound`` (its prototype built once)."""
    key = (5, *[id(p.prototype) for p in parts])
    entry = _COMPOSITES.get(key)
    if entry is None:
        entry = _keep(key, _joined_entry(tuple(p.prototype for p in parts)))
    values = tuple(_chain([p.values for p in parts]))
    names = tuple(_chain([p.names for p in parts]))
    order = entry[2]
    return Bound(entry[1], values, names if order is None else order(names))


def _joined_entry(prototypes: tuple[Update, ...]) -> tuple[Any, ...]:
    # The joined update mints every part's SETs first, then the REMOVEs: the parts' names (each
    # part's SETs', then its REMOVEs') go in that order.
    sets: list[int] = []
    removes: list[int] = []
    for update in prototypes:
        start = len(sets) + len(removes)
        count = len(update._shaped()[2])
        in_sets = len(tuple(_chain([s._shaped()[2] for s in update.sets])))
        sets += range(start, start + in_sets)
        removes += range(start + in_sets, start + count)
    order = [*sets, *removes]
    same = order == sorted(order)
    pick = None if same else operator.itemgetter(*order)  # two names at least: a tuple
    return prototypes, joined(*prototypes), pick


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


# ---------------------------------------------------------------------------- rendering by shape

Part = Update | Condition | Bound[Update] | Bound[Condition]


class _Probe(Request):
    """A ``Request`` that notes which names it minted as free ones (``#k<n>``), and whether one
    of ours could be taken for one (a name of ours beginning with ``k``: then requests of that
    shape are rendered by ``Request`` every time)."""

    __slots__ = ("clash", "free")

    def __init__(self) -> None:
        super().__init__()
        self.free: set[str] = set()
        self.clash = False

    def mint(self, operand: Operand) -> str:
        if isinstance(operand, Name) and not operand.free and str(operand.name).startswith("k"):
            self.clash = True
        return super().mint(operand)

    def _free(self, name: str) -> str:
        placeholder = super()._free(name)
        self.free.add(placeholder)
        return placeholder


@dataclass(frozen=True, slots=True)
class _Template:
    """A shape's rendering: its texts; its names as minted, each with its name or (a free one)
    its index among the request's free names; its value placeholders in order."""

    texts: tuple[str, ...]
    names: dict[str, str | int]
    free: tuple[tuple[str, int], ...]
    values: tuple[str, ...]


#: Templates by (the parts' shape keys, which of their free names are the same); None: render
#: with ``Request``. Bounded: emptied when full (the shapes are a few dozen, times how many
#: names a write removes or changes).
_TEMPLATES: dict[Any, _Template | None] = {}
_TEMPLATES_MAX = 2048


def _built(parts: tuple[Part, ...]) -> tuple[Update | Condition, ...]:
    return tuple(p.build() if isinstance(p, Bound) else p for p in parts)


def _compile(parts: tuple[Part, ...], frees: list[str], count: int) -> _Template | None:
    probe = _Probe()
    texts = tuple(p.render(probe) for p in _built(parts))
    if probe.clash or len(probe.values) != count:
        return None
    names = {p: frees.index(n) if p in probe.free else n for p, n in probe.names.items()}
    free = tuple((p, n) for p, n in names.items() if isinstance(n, int))
    return _Template(texts, names, free, tuple(probe.values))


def _shape_of(part: Part) -> _Shape:
    if not isinstance(part, Bound):
        return part._shaped()
    shape = part.prototype._shaped()
    if shape is _OPAQUE:
        return shape
    key, values, names = shape
    if len(part.values) != len(values) or len(part.names) != len(names):
        raise ValueError(
            f"{part.prototype} takes {len(values)} values and {len(names)} names, given "
            f"{len(part.values)} and {len(part.names)}"
        )
    return key, part.values, part.names


def _render(*parts: Part) -> tuple[tuple[str, ...], dict[str, str], dict[str, Any]]:
    """``parts`` rendered into one request, as ``Request`` renders them one after the other:
    their texts, and the request's names and values (``Request.params``)."""
    shapes = [_shape_of(p) for p in parts]
    if _OPAQUE in shapes:
        return _render_in_full(parts)
    frees: list[str] = []
    same: tuple[int, ...] = ()
    if any(s[2] for s in shapes):  # which free names are the same: they share a placeholder
        index: dict[str, int] = {}
        same = tuple([index.setdefault(f, len(index)) for f in _chain([s[2] for s in shapes])])
        frees = list(index)
    key = (tuple([s[0] for s in shapes]), same)
    values = tuple(_chain([s[1] for s in shapes]))
    try:
        template = _TEMPLATES[key]
    except KeyError:
        template = _compile(parts, frees, len(values))
        if len(_TEMPLATES) >= _TEMPLATES_MAX:
            _TEMPLATES.clear()
        _TEMPLATES[key] = template
    if template is None:
        return _render_in_full(parts)
    names: dict[str, Any] = template.names.copy()  # in minting order; free ones filled in:
    for placeholder, at in template.free:
        names[placeholder] = frees[at]
    exact = _EXACT
    wired = {
        p: {"S": v}
        if type(v) is str
        else {"N": str(v)}
        if type(v) is int and -exact < v < exact
        else to_wire(v)
        for p, v in zip(template.values, values, strict=True)
    }
    return template.texts, names, wired


def _render_in_full(
    parts: tuple[Part, ...],
) -> tuple[tuple[str, ...], dict[str, str], dict[str, Any]]:
    r = Request()
    texts = tuple(p.render(r) for p in _built(parts))
    return texts, r.names, r.values


def _placeholders(request: dict[str, Any], names: dict[str, str], values: dict[str, Any]) -> None:
    if names:
        request["ExpressionAttributeNames"] = names
    if values:
        request["ExpressionAttributeValues"] = values


def update_item(
    table: str,
    key: Mapping[str, Any],
    update: Update | Bound[Update],
    condition: Condition | Bound[Condition],
    *,
    returns: str | None = "ALL_NEW",
) -> dict[str, Any]:
    """An UpdateItem that returns the item (``returns``), and ALL_OLD when refused."""
    (expression, text), names, values = _render(update, condition)
    request: dict[str, Any] = {"TableName": table, "Key": dict(key)}
    request["UpdateExpression"] = expression
    if text:
        request["ConditionExpression"] = text
    if returns is not None:
        request["ReturnValues"] = returns
    request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    _placeholders(request, names, values)
    return request


def put_item(
    table: str,
    item: Mapping[str, Any],
    condition: Condition | Bound[Condition] = TRUE,
    *,
    old: bool = True,
) -> dict[str, Any]:
    """A PutItem of ``item`` (wire form) on ``condition``; ALL_OLD when refused."""
    (text,), names, values = _render(condition)
    request: dict[str, Any] = {"TableName": table, "Item": dict(item)}
    if text:
        request["ConditionExpression"] = text
    if old and text:
        request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    _placeholders(request, names, values)
    return request


def check(
    table: str, key: Mapping[str, Any], condition: Condition | Bound[Condition]
) -> dict[str, Any]:
    """A transaction's ConditionCheck; ALL_OLD when refused."""
    (text,), names, values = _render(condition)
    request = {"TableName": table, "Key": dict(key), "ConditionExpression": text}
    request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    _placeholders(request, names, values)
    return request
