"""Fault injection on a real client, through botocore's ``before-send`` event.

* ``Fault.LOST_RESPONSE``: the request reaches the engine and is applied, then the caller gets a
  ``ReadTimeoutError`` -- the ambiguous write every retrying client must survive;
* ``Fault.THROTTLE``: a 400 ``ThrottlingException`` (or ``ProvisionedThroughputExceeded``),
  nothing sent;
* ``Fault.SERVER_ERROR``: a 500 ``InternalServerError``, nothing sent;
* ``Fault.TRANSACTION_CONFLICT``: what real DynamoDB sends when a write meets an item held by
  an in-flight transaction (moto never does): ``TransactionConflictException`` for a single-item
  write, ``TransactionCanceledException`` with a ``TransactionConflict`` reason for a
  transaction; nothing sent;
* ``Fault.TRANSACTION_THROTTLED``: a transaction cancelled with a ``ThrottlingError`` reason
  (a plain ``ThrottlingException`` for a single-item write); nothing sent.

Reads are never given the two transaction faults (they are let through).

Faults are chosen by a seeded RNG per request (``rates``) or scripted (``script``: a list of
faults for the next requests, ``None`` meaning "let it through").

Counters: ``injected`` (per fault, all threads), ``passed`` (requests let through),
``by_operation`` (faults per DynamoDB operation) and ``injected_in_thread()`` (the calling
thread's own faults, so a worker sharing the client with other threads can tell whether *its*
call met a lost response). ``after_lost`` runs after a lost request was applied and before the
caller sees the error -- the place to slip in a rival write.
"""

from __future__ import annotations

import enum
import json
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError
from botocore.httpsession import URLLib3Session

from .hooks import Hooks

__all__ = [
    "Fault",
    "FaultInjector",
]


class Fault(enum.Enum):
    LOST_RESPONSE = "lost_response"
    THROTTLE = "throttle"
    THROTTLE_PROVISIONED = "throttle_provisioned"
    SERVER_ERROR = "server_error"
    TRANSACTION_CONFLICT = "transaction_conflict"
    TRANSACTION_THROTTLED = "transaction_throttled"


_TRANSACTION_FAULTS = {
    Fault.TRANSACTION_CONFLICT: ("TransactionConflict", "Transaction is ongoing for the item"),
    Fault.TRANSACTION_THROTTLED: ("ThrottlingError", "Throughput exceeds the current capacity"),
}
_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
_THROTTLED = (400, "ThrottlingException", "Rate of requests exceeds the allowed throughput.")
_ERROR_BODIES = {
    Fault.THROTTLE: _THROTTLED,
    Fault.THROTTLE_PROVISIONED: (
        400,
        "ProvisionedThroughputExceededException",
        "The level of configured provisioned throughput for the table was exceeded.",
    ),
    Fault.SERVER_ERROR: (500, "InternalServerError", "Internal server error"),
    Fault.TRANSACTION_CONFLICT: (
        400,
        "TransactionConflictException",
        "Transaction is ongoing for the item",
    ),
    Fault.TRANSACTION_THROTTLED: _THROTTLED,
}


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_args: Any, **_kwargs: Any) -> Iterable[bytes]:
        yield self._body


class FaultInjector(Hooks):
    """Attach to a boto3 DynamoDB client; ``injected`` counts what was done."""

    def __init__(
        self,
        client: Any,
        *,
        rates: dict[Fault, float] | None = None,
        script: Iterable[Fault | None] = (),
        operations: Iterable[str] | None = None,
        seed: int = 0,
        after_lost: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(client)
        # After RequestLog (registered first), so injected attempts are counted as sent.
        self.on("before-send.dynamodb", self._on_send)
        self._rates = dict(rates or {})
        self._script = list(script)
        self._operations = set(operations) if operations is not None else None
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._http = URLLib3Session()
        self.injected: Counter[Fault] = Counter()
        self.passed = 0
        self.by_operation: Counter[tuple[str, Fault]] = Counter()
        self._after_lost = after_lost
        self._local = threading.local()

    def injected_in_thread(self) -> Counter[Fault]:
        """Faults injected into requests sent by the calling thread (a copy)."""
        mine: Counter[Fault] | None = getattr(self._local, "injected", None)
        return Counter(mine) if mine is not None else Counter()

    def summary(self) -> dict[str, int]:
        """``{"passed": n, "lost_response": n, ...}``: every kind, zeros included."""
        with self._lock:
            out = {"passed": self.passed}
            out.update({fault.value: self.injected[fault] for fault in Fault})
            return out

    def _choose(self, operation: str) -> Fault | None:
        if self._operations is not None and operation not in self._operations:
            return None
        with self._lock:
            if self._script:
                return self._script.pop(0)
            roll = self._rng.random()
            for fault, rate in self._rates.items():
                if roll < rate:
                    return fault
                roll -= rate
            return None

    def _on_send(self, request: Any, **kwargs: Any) -> AWSResponse | None:
        operation = kwargs.get("event_name", "").rsplit(".", 1)[-1]
        fault = self._choose(operation)
        if fault in _TRANSACTION_FAULTS and operation in _READS:
            fault = None
        if fault is None:
            with self._lock:
                self.passed += 1
            return None
        with self._lock:
            self.injected[fault] += 1
            self.by_operation[(operation, fault)] += 1
        mine: Counter[Fault] | None = getattr(self._local, "injected", None)
        if mine is None:
            mine = self._local.injected = Counter()
        mine[fault] += 1
        if fault is Fault.LOST_RESPONSE:
            self._http.send(request)  # the engine applies it...
            if self._after_lost is not None:
                self._after_lost(operation)
            raise ReadTimeoutError(endpoint_url=request.url)  # ...the caller never hears back
        status, code, message = _ERROR_BODIES[fault]
        error: dict[str, Any] = {"message": message}
        if fault in _TRANSACTION_FAULTS and operation == "TransactWriteItems":
            code, error = _cancellation(request.body, *_TRANSACTION_FAULTS[fault])
        body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", **error})
        headers: Any = {
            "Content-Type": "application/x-amz-json-1.0",
            "x-amzn-RequestId": "injected",
        }
        return AWSResponse(request.url, status, headers, _Raw(body.encode()))


def _cancellation(body: bytes | str, reason: str, message: str) -> tuple[str, dict[str, Any]]:
    """A ``TransactionCanceledException`` as DynamoDB shapes it: one reason per action, the
    contended one on the first action (where a rival transaction would hold the session)."""
    actions = len(json.loads(body).get("TransactItems", []))
    reasons: list[dict[str, str]] = [{"Code": reason, "Message": message}]
    reasons += [{"Code": "None"}] * (actions - 1)
    codes = ", ".join(r["Code"] for r in reasons)
    return "TransactionCanceledException", {
        "Message": f"Transaction cancelled, please refer cancellation reasons for specific "
        f"reasons [{codes}]",
        "CancellationReasons": reasons,
    }
