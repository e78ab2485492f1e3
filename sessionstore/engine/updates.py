"""The embedded engine evaluates an update expression's values in one pass, planned once per text.

Layer: inside the embedded engine (``cache`` calls it from moto's update validator).
Why: moto validates an UpdateExpression by copying its whole tree, then walking the copy ten
times (placeholders, paths, functions, missing paths, arithmetic, key checks...): a walk per
node kind, each over every node, so a request cost the engine more with each action it carries,
most of a store's UpdateItem. What those walks produce is simple: for each action in order, its
path (the tree's own, unchanged) and the value it puts there, read from the item before any action
runs. Here each cached tree is turned once into a *plan* -- the actions and, for each value, an
expression of placeholders, paths, ``if_not_exists`` and ``+``/``-`` -- and a request evaluates
the plan against its item and values. The result is the tree moto's executor takes, so moto
still applies the actions (and the item's size checks).

Only success is decided here. Anything a walk of moto's would refuse or treat unusually -- an
undefined placeholder, a path into something that is not a map or a list, a missing attribute
read, arithmetic on a non-number, a SET of a key attribute, a function other than
``if_not_exists`` -- raises ``Fallback``, nothing of the item touched, and moto's own walks run
instead, with its own errors in its own order.
"""

from __future__ import annotations

import weakref
from typing import Any

#: A planned value: ("value", placeholder) | ("path", path node) | ("if_not_exists", a, b) |
#: ("op", "+" or "-", left, right). A planned action: (action class, path node, value or None).
Plan = list[tuple[Any, Any, Any]]
#: The plan of each cached tree (None: a tree moto's own walks handle).
_PLANS: weakref.WeakKeyDictionary[Any, Plan | None] = weakref.WeakKeyDictionary()
#: The containers of each planned tree around its actions (``_shape``).
_SHAPES: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


class Fallback(Exception):
    """Not for the one-pass evaluation: moto's own walks decide this request."""


class _Unplanned(Exception):
    """A tree with a node kind the plan does not cover."""


def plan(tree: Any) -> Plan | None:
    """The plan of ``tree`` (a cached update tree, never changed), made once."""
    try:
        return _PLANS[tree]
    except KeyError:
        pass
    try:
        made: Plan | None = list(_actions(tree))
    except _Unplanned:
        made = None
    if made is not None and _reserved(tree):
        made = None  # moto refuses a reserved word as it reaches it: its walks decide
    if made is not None:
        _SHAPES[tree] = _shape(tree, _containers(_nodes()))
    _PLANS[tree] = made
    return made


def _reserved(node: Any) -> bool:
    """Whether the tree names an attribute by a reserved word (not through a placeholder)."""
    from moto.dynamodb.parsing.reserved_keywords import ReservedKeywords

    n = _nodes()
    if type(node) is n.ExpressionAttribute:
        return str(node.children[0]).upper() in ReservedKeywords.get_reserved_keywords()
    return isinstance(node, n.Node) and any(_reserved(c) for c in node.children or ())


def _nodes() -> Any:
    from moto.dynamodb.parsing import ast_nodes

    return ast_nodes


def _actions(node: Any) -> Any:
    """The tree's actions in the order moto's ``find_clauses`` lists them."""
    n = _nodes()
    kind = type(node)
    if kind is n.UpdateExpressionSetAction:
        path, value = node.children
        yield kind, _path(path), _value(value)
    elif kind is n.UpdateExpressionRemoveAction:
        (path,) = node.children
        yield kind, _path(path), None
    elif kind in (n.UpdateExpressionAddAction, n.UpdateExpressionDeleteAction):
        path, value = node.children
        if type(value) is not n.ExpressionAttributeValue:
            raise _Unplanned
        yield kind, _path(path), ("value", value.children[0])
    elif kind in _containers(n):  # clauses and lists of actions
        for child in node.children or ():
            yield from _actions(child)
    else:
        raise _Unplanned


def _containers(n: Any) -> tuple[type, ...]:
    return (
        n.UpdateExpression,
        n.UpdateExpressionSetClause,
        n.UpdateExpressionSetActions,
        n.UpdateExpressionRemoveClause,
        n.UpdateExpressionRemoveActions,
        n.UpdateExpressionAddClause,
        n.UpdateExpressionAddActions,
        n.UpdateExpressionDeleteClause,
        n.UpdateExpressionDeleteActions,
    )


def _path(node: Any) -> Any:
    n = _nodes()
    parts = (n.ExpressionAttribute, n.ExpressionAttributeName, n.ExpressionPathDescender)
    if type(node) is not n.UpdateExpressionPath or not node.children:
        raise _Unplanned
    for part in node.children:
        if type(part) not in parts and type(part) is not n.ExpressionSelector:
            raise _Unplanned
    return node


def _value(node: Any) -> Any:
    n = _nodes()
    kind = type(node)
    if kind is n.UpdateExpressionValue:
        children = node.children
        if len(children) == 1:
            return _value(children[0])
        if len(children) == 3 and type(children[1]) is n.ExpressionValueOperator:
            operator = children[1].children[0]
            if operator in ("+", "-"):
                return ("op", operator, _value(children[0]), _value(children[2]))
        raise _Unplanned
    if kind is n.ExpressionAttributeValue:
        return ("value", node.children[0])
    if kind is n.UpdateExpressionPath:
        return ("path", _path(node))
    children = node.children
    if kind is n.UpdateExpressionFunction and len(children) == 3 and children[0] == "if_not_exists":
        return ("if_not_exists", _value(children[1]), _value(children[2]))
    raise _Unplanned


_MISSING = object()


def validated(tree: Any, names: Any, values: Any, item: Any, table: Any) -> Any:
    """The validated tree moto's walks make of the planned ``tree`` for this request, or
    ``Fallback``. Reads ``item``, never changes it."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    n = _nodes()
    names = names or {}
    values = values or {}
    keys = set(table.attribute_keys) | {d["AttributeName"] for d in table.attr}

    def read(path: Any) -> Any:
        return _resolve(n, item.attrs, path.children, names)[0]

    def evaluate(value: Any) -> Any:
        kind = value[0]
        if kind == "value":
            return DynamoType(values[value[1]])
        if kind == "path":
            return read(value[1])
        if kind == "if_not_exists":
            first, second = evaluate(value[1]), evaluate(value[2])
            return second if first is _MISSING else first
        left, right = evaluate(value[2]), evaluate(value[3])
        if left is _MISSING or right is _MISSING:
            raise Fallback
        return left + right if value[1] == "+" else left - right

    steps = _PLANS[tree]
    if steps is None:
        raise Fallback
    actions = []
    try:
        for kind, path, value in steps:
            target, creatable = _resolve(n, item.attrs, path.children, names)
            if target is _MISSING and not creatable:
                raise Fallback  # a path moto cannot create: its error
            children = [path]
            if value is not None:
                result = evaluate(value)
                if result is _MISSING:
                    raise Fallback
                children.append(_node(n.DDBTypedValue, [result]))
            if kind is n.UpdateExpressionSetAction and path.children[0].children[0] in keys:
                raise Fallback  # moto's checks of a key attribute's value
            actions.append(_node(kind, children))
    except Fallback:
        raise
    except Exception as exc:  # anything moto's walks would raise: they raise it
        raise Fallback from exc
    return _rebuilt(_SHAPES[tree], iter(actions))


def _shape(node: Any, containers: tuple[type, ...]) -> Any:
    """The containers of a planned tree around its actions (None for an action)."""
    if type(node) in containers:
        return type(node), [_shape(child, containers) for child in node.children or ()]
    return None


def _rebuilt(shape: Any, actions: Any) -> Any:
    """The tree of ``shape`` with the next of ``actions`` for each action: the shape moto's walks
    leave (its ``normalize`` then lists the actions)."""
    if shape is None:
        return next(actions)
    kind, children = shape
    return _node(kind, [_rebuilt(child, actions) for child in children])


def _resolve(n: Any, target: Any, parts: list[Any], names: Any) -> tuple[Any, bool]:
    """moto's ``ExpressionPathResolver.resolve_expression_path_nodes``, without its nodes: the
    value at the path, or ``_MISSING`` and whether the path could be created there."""
    last = parts[-1]
    for part in parts:
        kind = type(part)
        if kind is n.ExpressionPathDescender:
            continue
        if kind is n.ExpressionSelector:
            if not target.is_list():
                raise Fallback  # moto: an invalid document path
            try:
                target = target[part.children[0]]
            except IndexError:
                return _MISSING, part is last
            continue
        name = names[part.children[0]] if kind is n.ExpressionAttributeName else part.children[0]
        try:
            target = target[name]
        except (KeyError, TypeError):
            return _MISSING, part is last
    return target, True


def _node(kind: type, children: list[Any]) -> Any:
    """A node as moto's constructor makes it, without setting its children's parent: the
    paths are the cached tree's own, shared, read-only."""
    made: Any = object.__new__(kind)
    made.__dict__.update(type=kind.__name__, children=children, parent=None)
    return made
