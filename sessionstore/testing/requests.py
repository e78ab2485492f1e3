"""Count the HTTP requests a client sends, per operation, from botocore's ``before-send`` event.

``before-send`` fires once per attempt on the wire, botocore's own retries included, so the
counts are what DynamoDB bills and sees -- deterministic, unlike timings. Each request is also
recorded as the IAM actions it needs (``iam_actions``): a transaction is authorized per action
inside it. ``RequestLog.every_client()`` records the requests of every client made while it is
open too (a server's, the CLI's), for a test that must see them all.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import botocore.handlers

from .hooks import Hooks

__all__ = [
    "IN_TRANSACTION",
    "RequestLog",
    "iam_actions",
]

#: The IAM action of each kind of action inside ``TransactWriteItems``.
IN_TRANSACTION = {
    "ConditionCheck": "ConditionCheckItem",
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
}


def iam_actions(operation: str, body: object) -> list[str]:
    """The IAM actions (without the ``dynamodb:`` prefix) a request needs."""
    if operation != "TransactWriteItems":
        return [operation]
    text = body.decode() if isinstance(body, bytes) else str(body)
    items = json.loads(text)["TransactItems"]
    return [IN_TRANSACTION[kind] for item in items for kind in item]


class RequestLog(Hooks):
    """``with RequestLog(client) as log:`` records each request ``client`` sends inside."""

    def __init__(self, client: Any = None) -> None:
        super().__init__(client)
        # First, so attempts that a fault injector fails are counted too.
        self.on("before-send.dynamodb", self._on_send, first=True)
        self._lock = threading.Lock()
        self.operations: list[str] = []
        self.actions: list[str] = []
        self._everywhere = False

    def _on_send(self, request: Any, **kwargs: Any) -> None:
        operation = kwargs.get("event_name", "").rsplit(".", 1)[-1]
        actions = iam_actions(operation, getattr(request, "body", b"{}"))
        with self._lock:
            self.operations.append(operation)
            self.actions.extend(actions)

    def _on_any_client(self, request: Any, **kwargs: Any) -> None:
        if self._everywhere:  # the clients made meanwhile keep the handler: record while open
            self._on_send(request, **kwargs)

    @classmethod
    @contextmanager
    def every_client(cls, *clients: Any) -> Iterator[RequestLog]:
        """A log of ``clients`` and of every client made while it is open (botocore's
        built-in handlers are copied into each new client's events)."""
        log = cls()
        handler = ("before-send.dynamodb", log._on_any_client)
        log._everywhere = True
        botocore.handlers.BUILTIN_HANDLERS.append(handler)
        try:
            with ExitStack() as stack:
                for client in clients:
                    stack.enter_context(Hooks(client).on(*handler, first=True))
                yield log
        finally:
            log._everywhere = False
            botocore.handlers.BUILTIN_HANDLERS.remove(handler)

    def iam_actions(self) -> set[str]:
        """Every IAM action the requests needed, ``dynamodb:`` prefixed."""
        with self._lock:
            return {f"dynamodb:{action}" for action in self.actions}

    def reset(self) -> None:
        with self._lock:
            self.operations.clear()
            self.actions.clear()

    @property
    def count(self) -> int:
        return len(self.operations)

    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(self.operations)
