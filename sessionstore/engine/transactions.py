"""The embedded engine evaluates each condition of a transaction once, not twice.

Layer: inside the embedded engine (``cache.install`` installs it), around moto's
``DynamoDBBackend.transact_write_items``. Why: moto evaluates an action's
``ConditionExpression`` against the item before it runs the action (to cancel the whole
transaction with that action's reason), then hands the same condition to the ``put_item``,
``update_item`` or ``delete_item`` that runs it, which evaluates it again against the same item:
each condition of the store's transactions cost the engine twice. Nothing runs between the two
evaluations (the engine runs one request at a time, and moto runs each action right after it
evaluates that action's condition), so the second one can only agree with the first. Here, while a
transaction runs, those three are called without the condition the transaction just evaluated.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

#: Set while moto's backend runs a transaction: its actions' conditions are evaluated already.
_EVALUATED: ContextVar[bool] = ContextVar("sessionstore_transaction_conditions", default=False)
_ACTIONS = ("put_item", "update_item", "delete_item")


def install() -> None:
    """Patch moto's DynamoDB backend in this process (once: ``cache.install``)."""
    from moto.dynamodb.models import DynamoDBBackend

    backend: Any = DynamoDBBackend
    transact = backend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        token = _EVALUATED.set(True)
        try:
            transact(self, transact_items)
        finally:
            _EVALUATED.reset(token)

    for name in _ACTIONS:
        setattr(backend, name, _without_evaluated_condition(getattr(backend, name)))
    backend.transact_write_items = transact_write_items


def _without_evaluated_condition(action: Any) -> Any:
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _EVALUATED.get():
            return action(self, *args, **kwargs)
        token = _EVALUATED.set(False)  # the transaction's own call only, not one it makes
        try:
            if "condition_expression" in kwargs:
                kwargs = {**kwargs, "condition_expression": None}
            return action(self, *args, **kwargs)
        finally:
            _EVALUATED.reset(token)

    run.__name__ = action.__name__
    run.__doc__ = action.__doc__
    return run
