"""Count the HTTP requests a client sends, per operation, from botocore's ``before-send`` event.

``before-send`` fires once per attempt on the wire, botocore's own retries included, so the
counts are what DynamoDB bills and sees -- deterministic, unlike timings. ``iam_actions`` says
which IAM actions the requests needed: a transaction is authorized per action inside it, so its
body is kept and read only when asked. ``RequestLog.every_client()`` records the requests of
every client made while it is open too (a server's, the CLI's), for a test that must see them
all.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
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


def iam_actions(operation: str, params: Mapping[str, Any]) -> list[str]:
    """The IAM actions (without the ``dynamodb:`` prefix) a request with ``params`` needs."""
    if operation != "TransactWriteItems":
        return [operation]
    return [IN_TRANSACTION[kind] for item in params["TransactItems"] for kind in item]


class RequestLog(Hooks):
    """``with RequestLog(client) as log:`` records each request ``client`` sends inside."""

    def __init__(self, client: Any = None) -> None:
        super().__init__(client)
        # First, so attempts that a fault injector fails are counted too.
        self.on("before-send.dynamodb", self._on_send, first=True)
        self._lock = threading.Lock()
        self.operations: list[str] = []
        self._transactions: list[bytes] = []  # their bodies, read by ``iam_actions``
        self._everywhere = False

    def _on_send(self, request: Any, **kwargs: Any) -> None:
        operation = kwargs.get("event_name", "").rsplit(".", 1)[-1]
        with self._lock:
            self.operations.append(operation)
            if operation == "TransactWriteItems":
                self._transactions.append(request.body)

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
            operations, bodies = list(self.operations), list(self._transactions)
        actions = {op for op in operations if op != "TransactWriteItems"}
        for body in bodies:
            actions.update(iam_actions("TransactWriteItems", json.loads(body)))
        return {f"dynamodb:{action}" for action in actions}

    def reset(self) -> None:
        with self._lock:
            self.operations.clear()
            self._transactions.clear()

    @property
    def count(self) -> int:
        return len(self.operations)

    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(self.operations)
