"""What a client puts on the wire, from botocore's own events -- exact, unlike timings.

* ``before-send`` fires once per HTTP attempt (botocore's retries included): requests;
* ``after-call`` fires once per API call with the parsed response, errors included: we count
  the calls that failed a condition (``ConditionalCheckFailedException``, or a transaction
  cancelled, ``TransactionCanceledException``), i.e. wasted writes.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

CONDITION_FAILED = "ConditionalCheckFailedException"
TRANSACTION_CANCELLED = "TransactionCanceledException"


class WireCounter:
    """Attach to any botocore DynamoDB client (boto3's, or the one inside PynamoDB)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self._attached = False

    def _on_send(self, request: Any, **kwargs: Any) -> None:
        operation = kwargs.get("event_name", "").rsplit(".", 1)[-1]
        with self._lock:
            self.requests[operation] += 1

    def _on_after_call(self, parsed: Any = None, **kwargs: Any) -> None:
        code = (parsed or {}).get("Error", {}).get("Code")
        if code:
            with self._lock:
                self.errors[code] += 1

    def attach(self) -> WireCounter:
        if not self._attached:
            events = self.client.meta.events
            events.register_first("before-send.dynamodb", self._on_send)
            events.register("after-call.dynamodb", self._on_after_call)
            self._attached = True
        return self

    def detach(self) -> None:
        if self._attached:
            events = self.client.meta.events
            events.unregister("before-send.dynamodb", self._on_send)
            events.unregister("after-call.dynamodb", self._on_after_call)
            self._attached = False

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.errors.clear()

    def snapshot(self) -> tuple[Counter[str], Counter[str]]:
        with self._lock:
            return Counter(self.requests), Counter(self.errors)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.requests.values())

    @property
    def condition_failures(self) -> int:
        with self._lock:
            return self.errors[CONDITION_FAILED]


class ThreadWrites:
    """Writes that succeeded, and writes refused on a condition, per calling thread: botocore
    fires ``after-call`` in the thread that made the call, so a writer can tell whether a library
    call it made landed a write of its own (``count()`` before and after), or was refused by
    another writer's (``refused()``)."""

    WRITES = frozenset({"UpdateItem", "PutItem", "DeleteItem", "TransactWriteItems"})

    def __init__(self, client: Any) -> None:
        self._local = threading.local()
        client.meta.events.register("after-call.dynamodb", self._on_after_call)

    def _on_after_call(self, parsed: Any = None, **kwargs: Any) -> None:
        operation = kwargs.get("event_name", "").rsplit(".", 1)[-1]
        if operation not in self.WRITES:
            return
        code = (parsed or {}).get("Error", {}).get("Code")
        if not code:
            self._local.n = self.count() + 1
        elif code in (CONDITION_FAILED, TRANSACTION_CANCELLED):
            self._local.refused = self.refused() + 1

    def count(self) -> int:
        n: int = getattr(self._local, "n", 0)
        return n

    def refused(self) -> int:
        n: int = getattr(self._local, "refused", 0)
        return n
