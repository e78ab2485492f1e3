"""The embedded engine backs up an item before an update by what the update can change.

Layer: inside the embedded engine (``local`` uses it), under moto's DynamoDB. Why: to put an item
back when an update or a transaction is refused, moto's way was a deep copy of each item, every
time: a large share of a transaction's cost, growing with the item. But moto changes an item's
values in place only where an action reaches inside one (a nested path; ``ADD``/``DELETE`` on a
set); a top-level ``SET``/``REMOVE`` replaces a value, a ``Put`` or ``Delete`` replaces the item
object. So a backup is the attributes' dict, with a copy of just the values an action reaches
inside; put back, it is the item as it was.
"""

from __future__ import annotations

import copy
from contextvars import ContextVar
from typing import Any


def copied(attrs: dict[str, Any]) -> dict[str, Any]:
    """A copy of every value of ``attrs``."""
    return {name: copy.deepcopy(value) for name, value in attrs.items()}


def before_action(action: dict[str, Any], attrs: dict[str, Any]) -> dict[str, Any] | None:
    """What puts ``attrs`` back as they are after a transaction's ``action`` ran (None: copy
    them whole, ``copied``)."""
    kind, op = next(iter(action.items()))
    if kind != "Update":
        return dict(attrs)  # a Put or a Delete replaces the item object; a check reads it
    try:
        from moto.dynamodb.parsing import ast_nodes
        from moto.dynamodb.parsing.expressions import (  # type: ignore[attr-defined]
            UpdateExpressionParser,
        )

        tree = UpdateExpressionParser.make(op["UpdateExpression"])
        kinds = [
            ast_nodes.UpdateExpressionSetAction,  # type: ignore[attr-defined]
            ast_nodes.UpdateExpressionRemoveAction,  # type: ignore[attr-defined]
            ast_nodes.UpdateExpressionAddAction,  # type: ignore[attr-defined]
            ast_nodes.UpdateExpressionDeleteAction,  # type: ignore[attr-defined]
        ]
        return before_update(tree.find_clauses(kinds), attrs, op.get("ExpressionAttributeNames"))
    except Exception:  # moto refuses it as it runs; or an AttributeUpdates
        return None


def before_update(actions: Any, attrs: dict[str, Any], names: Any) -> dict[str, Any]:
    """What puts ``attrs`` back as they are if the update ``actions`` fail: the top-level
    attributes, and a copy of each one an action changes inside (a nested path, or
    ``ADD``/``DELETE``, which change a set in place); a top-level ``SET``/``REMOVE`` replaces a
    value, never changes it (a value read from another attribute is shared, but moto refuses an
    action inside an attribute set in the same expression: overlapping paths)."""
    names = names or {}
    saved = dict(attrs)
    for action in actions:
        parts = action.children[0].children
        first = parts[0].children[0]
        name = (
            names.get(first, first)
            if type(parts[0]).__name__ == "ExpressionAttributeName"
            else first
        )
        plain = type(action).__name__ in (
            "UpdateExpressionSetAction",
            "UpdateExpressionRemoveAction",
        )
        if (len(parts) > 1 or not plain) and name in attrs and saved[name] is attrs[name]:
            saved[name] = copy.deepcopy(attrs[name])
    return saved


def install() -> None:
    """Skip moto's copies of an item before an ``UpdateItem`` that nothing reads (once:
    ``local.answer_quickly``): its handler's, kept for ``ReturnValues`` ``ALL_OLD`` and
    ``UPDATED_*`` (for ``NONE`` and ``ALL_NEW`` it only wrote the old item to JSON and compared
    it with the new one, attribute by attribute, for an answer that leaves both out: it gets no
    item instead), and its backend's, kept for the table's stream (a table without one reads
    nothing)."""
    from types import SimpleNamespace

    from moto.dynamodb import models, responses
    from moto.dynamodb.models.dynamo_type import Item

    unread: ContextVar[bool] = ContextVar("sessionstore_moto_unread_copy", default=False)

    def copier(deepcopy: Any, unread_copy: Any) -> Any:
        def maybe(value: Any, memo: Any = None) -> Any:
            if unread.get() and type(value) is Item:
                return unread_copy(value)
            return deepcopy(value, memo)

        return SimpleNamespace(deepcopy=maybe)

    handler: Any = responses.DynamoHandler
    backend: Any = models.DynamoDBBackend
    answer = handler.update_item
    update = backend.update_item

    def update_item(self: Any) -> Any:
        token = unread.set(self.body.get("ReturnValues", "NONE") in ("NONE", "ALL_NEW"))
        try:
            return answer(self)
        finally:
            unread.reset(token)

    def update_in_backend(self: Any, table_name: str, *args: Any, **kwargs: Any) -> Any:
        token = unread.set(self.get_table(table_name).stream_shard is None)
        try:
            return update(self, table_name, *args, **kwargs)
        finally:
            unread.reset(token)

    # the handler: the old item only feeds what the answer leaves out; the backend: read before
    # any change (moto's stream would read it after), or not at all
    responses.copy = copier(copy.deepcopy, lambda _item: None)  # type: ignore[attr-defined]
    models.copy = copier(models.copy.deepcopy, lambda item: item)  # type: ignore[attr-defined]
    handler.update_item = update_item
    backend.update_item = update_in_backend
