"""Count the HTTP requests a client sends, per operation, from botocore's ``before-send`` event.

``before-send`` fires once per attempt on the wire, botocore's own retries included, so the
counts are what DynamoDB bills and sees -- deterministic, unlike timings.
"""

from __future__ import annotations

import threading
from collections import Counter
from types import TracebackType
from typing import Any


class RequestLog:
    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self.operations: list[str] = []
        self._attached = False

    def _on_send(self, request: Any, **kwargs: Any) -> None:
        operation = kwargs.get("event_name", "").rsplit(".", 1)[-1]
        with self._lock:
            self.operations.append(operation)

    def attach(self) -> RequestLog:
        if not self._attached:
            # First, so attempts that a fault injector fails are counted too.
            self._client.meta.events.register_first("before-send.dynamodb", self._on_send)
            self._attached = True
        return self

    def detach(self) -> None:
        if self._attached:
            self._client.meta.events.unregister("before-send.dynamodb", self._on_send)
            self._attached = False

    def reset(self) -> None:
        with self._lock:
            self.operations.clear()

    @property
    def count(self) -> int:
        return len(self.operations)

    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(self.operations)

    def __enter__(self) -> RequestLog:
        return self.attach()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.detach()
