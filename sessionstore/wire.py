"""Talking to DynamoDB: wire conversion, and every failure translated into our errors.

Condition failures become internal exceptions carrying the item as it is (ALL_OLD), so the
store can explain them without a second read; throttling and network faults that outlive
botocore's retries become ``Unavailable``, saying whether a write may have landed.
"""

from __future__ import annotations

import threading
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    HTTPClientError,
    ReadTimeoutError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from .errors import DynamoDBError, ItemTooLarge, TableNotFound, Unavailable
from .expressions import to_wire

_DESER = TypeDeserializer()

_THROTTLES = {
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
}
_SERVER_ERRORS = {"InternalServerError", "ServiceUnavailable", "InternalFailure"}
_READS = frozenset({"get_item", "query"})
#: When botocore's own retries give up on a write whose outcome is unknown, re-send it (same
#: token) at most this many times to settle the outcome. Anything else fails fast: botocore has
#: already retried it, and stacking our retries on its retries multiplies the load.
_SETTLE_RESENDS = 2
_ATTEMPTS = threading.local()


def watch_attempt(
    caught_exception: Exception | None = None, response: Any = None, **_: Any
) -> None:
    """``needs-retry`` hook: note any attempt that may have been applied without our hearing
    back (a read timeout, a dropped connection, a 5xx), since botocore reports only the last."""
    status = response[0].status_code if response and response[0] is not None else 0
    if isinstance(caught_exception, ReadTimeoutError | ConnectionClosedError) or status >= 500:
        _ATTEMPTS.ambiguous = True


def value_from_wire(value: dict[str, Any]) -> Any:
    # Strings and lists of strings are most of what comes back; numbers stay Decimal, as
    # boto3's deserializer would make them.
    if "S" in value:
        return value["S"]
    if "L" in value:
        return [value_from_wire(v) for v in value["L"]]
    return _DESER.deserialize(value)  # type: ignore[arg-type]


def to_python(item: dict[str, Any] | None) -> dict[str, Any] | None:
    if not item:
        return None
    return {k: value_from_wire(v) for k, v in item.items()}


def item_to_wire(item: dict[str, Any]) -> dict[str, Any]:
    return {k: to_wire(v) for k, v in item.items()}


class ConditionFailed(Exception):
    """Internal: a condition failed; ``old`` is the item as it is (None if absent).

    ``ambiguous``: an earlier attempt of the same request, retried inside botocore, may have
    been applied without our hearing back -- so the failure may be our own write's doing.
    """

    def __init__(self, old: dict[str, Any] | None, ambiguous: bool) -> None:
        self.old = old
        self.ambiguous = ambiguous


class Settle:
    """Tracks the Unavailable failures of one logical write (see ``_SETTLE_RESENDS``)."""

    def __init__(self) -> None:
        self.resends = 0
        self.maybe_applied = False

    def absorb(self, exc: Unavailable) -> None:
        """Return to re-send, or raise: fail fast unless the outcome is unknown."""
        if exc.maybe_applied and self.resends < _SETTLE_RESENDS:
            self.maybe_applied = True
            self.resends += 1
            return
        if self.maybe_applied and not exc.maybe_applied:
            raise Unavailable(str(exc), maybe_applied=True) from exc
        raise exc


class Cancelled(Exception):
    """Internal: a transaction was cancelled; one reason per action, in order."""

    def __init__(self, reasons: list[dict[str, Any]]) -> None:
        self.reasons = reasons
        self.conflict = any(r.get("Code") == "TransactionConflict" for r in reasons)

    def failed(self, index: int) -> bool:
        return (
            index < len(self.reasons)
            and self.reasons[index].get("Code") == "ConditionalCheckFailed"
        )

    def old(self, index: int) -> dict[str, Any] | None:
        if index >= len(self.reasons):
            return None
        return to_python(self.reasons[index].get("Item"))



def send(
client: Any, operation: str, request: dict[str, Any], table_name: str, item_size_limit: int
) -> Any:
    """Send one request; translate every failure into our errors."""
    _ATTEMPTS.ambiguous = False
    try:
        return getattr(client, operation)(**request)
    except ClientError as exc:
        response: dict[str, Any] = dict(exc.response)
        code = response.get("Error", {}).get("Code", "")
        message = response.get("Error", {}).get("Message", "")
        if code == "ConditionalCheckFailedException":
            raise ConditionFailed(
                to_python(response.get("Item")), getattr(_ATTEMPTS, "ambiguous", False)
            ) from exc
        if code == "TransactionCanceledException":
            raise Cancelled(response.get("CancellationReasons", [])) from exc
        if code in _THROTTLES or code in _SERVER_ERRORS:
            raise Unavailable(
                f"DynamoDB {code} after retries: {message}",
                maybe_applied=operation not in _READS and _ATTEMPTS.ambiguous,
            ) from exc
        if code == "ResourceNotFoundException":
            raise TableNotFound(f"table {table_name!r} not found: {message}") from exc
        if code == "ValidationException" and "size" in message.lower():
            raise ItemTooLarge(0, 0, item_size_limit, by_engine=True) from exc
        raise DynamoDBError(code, message) from exc
    except (BotoConnectionError, HTTPClientError) as exc:
        raise Unavailable(
            f"DynamoDB unreachable after retries: {exc}",
            maybe_applied=operation not in _READS and _ATTEMPTS.ambiguous,
        ) from exc

