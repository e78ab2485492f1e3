"""The embedded engine keeps ``ClientRequestToken`` as DynamoDB does: a repeat is not re-applied.

Layer: inside the embedded engine (``local.answer_like_dynamodb`` installs it), around moto's
``TransactWriteItems``. Why: botocore fills in ``ClientRequestToken`` once per call and sends it
again on each of its retries; DynamoDB answers a repeat of a token within 10 minutes of the first
request's success as that success, without applying it again, and a *different* request under the
same token with ``IdempotentParameterMismatchException``. moto ignored the token: a retry after a
lost response ran the transaction twice (its conditions usually refused it, as a conflict).

What is remembered: each successful transaction's token, a digest of the rest of its request, and
when it completed, for ``WINDOW_S`` by the ledger's clock (injectable, for tests), at most
``MAX_TOKENS`` of them. A cancelled or
refused transaction is not remembered: DynamoDB's documents promise a repeat's success only of a
successful call, so a repeat of a refused one runs again. The check, the run and the record happen
under the engine's lock (``local.serialize_moto``), as one step.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

#: "A client request token is valid for 10 minutes after the first request that uses it is
#: completed."
WINDOW_S = 600.0
#: At most this many tokens are remembered (the oldest forgotten first): a bound on the engine's
#: memory, reached only past ~160 transactions a second for 10 minutes.
MAX_TOKENS = 100_000
MISMATCH = (
    "DynamoDB rejected the request because you retried a request with a different payload but "
    "with an idempotent token that was already used."
)


class TokenLedger:
    """Tokens of the transactions that succeeded in the last ``WINDOW_S`` seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        # token -> (digest of the request, when it completed, its response), oldest first
        self._seen: OrderedDict[str, tuple[str, float, Any]] = OrderedDict()

    def repeat_of(self, token: str, request: Mapping[str, Any]) -> tuple[bool, Any]:
        """``(True, the first response)`` for a repeat of a request that succeeded; ``(False,
        None)`` for a token not seen (or no longer); ``IdempotentParameterMismatchException`` for
        another request under a token in use."""
        with self._lock:
            self._forget_old()
            seen = self._seen.get(token)
            if seen is not None and seen[1] <= self.clock() - WINDOW_S:
                del self._seen[token]  # out of the window, wherever it stood in the order
                seen = None
        if seen is None:
            return False, None
        digest, _, response = seen
        if digest != _digest(request):
            raise _mismatch()
        return True, response

    def record(self, token: str, request: Mapping[str, Any], response: Any) -> None:
        with self._lock:
            self._seen[token] = (_digest(request), self.clock(), response)
            self._seen.move_to_end(token)
            self._forget_old()

    def _forget_old(self) -> None:
        while len(self._seen) > MAX_TOKENS:
            self._seen.popitem(last=False)
        horizon = self.clock() - WINDOW_S
        while self._seen:
            token, (_, completed, _) = next(iter(self._seen.items()))
            if completed > horizon:
                break
            del self._seen[token]


#: The engine's ledger: moto's tables are per process, and so are the tokens.
LEDGER = TokenLedger()


def _digest(request: Mapping[str, Any]) -> str:
    rest = {k: v for k, v in request.items() if k != "ClientRequestToken"}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def _mismatch() -> Exception:
    from moto.dynamodb.exceptions import DynamodbException

    return DynamodbException(
        "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException", MISMATCH
    )


def install() -> None:
    """Patch moto's ``TransactWriteItems`` in this process (once: ``local``)."""
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.transact_write_items

    def transact_write_items(self: Any) -> Any:
        token = self.body.get("ClientRequestToken")
        if not token:
            return original(self)
        repeat, response = LEDGER.repeat_of(str(token), self.body)
        if repeat:
            return response
        response = original(self)  # raises if refused or cancelled: nothing remembered
        LEDGER.record(str(token), self.body, response)
        return response

    DynamoHandler.transact_write_items = transact_write_items  # type: ignore[method-assign]
