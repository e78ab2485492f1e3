"""Talking to DynamoDB: wire conversion, and every failure translated into what it means.

A request either succeeds or fails in one of the ways the attempt driver (``table``) handles:
``ConditionFailed`` / ``Cancelled`` (a condition was false; they carry the item as it is, so the
store explains the failure without a second read), ``Contended`` (refused because of other
traffic, provably not applied; botocore does not retry it, so the driver backs off) or
``Unavailable`` (a fault that outlived botocore's retries, saying whether a write may have landed).

botocore reports only its last attempt, so a ``needs-retry`` hook marks every attempt that may
have landed (``may_have_landed``: the one rule, which telemetry counts by too). The mark lives in
botocore's per-request ``context`` (tagged in ``before-call`` from a context variable), not in a
thread-local, so it is right for threads and asyncio tasks alike. A write's attempts that may have
landed and whose answer never reached us are reported to ``observe`` (``answers_lost``) when the
send ends.

Layer: the bottom of the write path, under ``table``; it imports ``observe`` and nothing that
observes. Why: what a DynamoDB answer means is decided here once, for the driver and for whoever
listens (telemetry imports these definitions rather than keeping its own).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.types import TypeDeserializer
from botocore import xform_name
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    ProxyConnectionError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from . import observe
from .errors import DynamoDBError, ItemTooLarge, TableNotFound, Unavailable
from .limits import check_limits

_DESER = TypeDeserializer()

#: DynamoDB's throttling and server-error codes (also what telemetry and the CLI classify by).
THROTTLES = frozenset(
    {"ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded"}
)
SERVER_ERRORS = frozenset({"InternalServerError", "ServiceUnavailable", "InternalFailure"})
#: Cancellation reasons that mean a transaction was throttled: nothing was written.
THROTTLE_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded"})
#: Cancellation reasons that mean "other traffic got in the way": nothing was written.
_CONTENTION_REASONS = THROTTLE_REASONS | {"TransactionConflict"}
#: The operations that read (API names): one that may have landed changed nothing.
READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
_READ_METHODS = frozenset(map(xform_name, READS))  # as ``send`` is given them: ``get_item`` ...


class NotSent(Exception):
    """Internal: a request's send-by time (``send_by``) had passed when botocore was about to
    send one of its attempts, so that attempt was not sent."""


#: Failures that prove the request never reached DynamoDB.
NEVER_SENT = (EndpointConnectionError, ConnectTimeoutError, ProxyConnectionError, NotSent)
_CONTEXT_KEY = "sessionstore.attempt"
#: DynamoDB's messages for an item over its size limit (PutItem; "to update": UpdateItem), whole or
#: after a prefix -- not "Expression size has exceeded ..." nor "Size of hashkey has exceeded ...".
_ITEM_SIZE = re.compile(
    r"\bitem size (?:to update )?has exceeded the maximum allowed size", re.IGNORECASE
)


def is_item_size_message(message: object) -> bool:
    """Is this DynamoDB error message about an item over the maximum item size?"""
    return isinstance(message, str) and _ITEM_SIZE.search(message) is not None


def may_have_landed(caught_exception: Exception | None, response: Any) -> bool:
    """May this HTTP attempt have been applied? (botocore's ``needs-retry`` arguments.)

    Yes unless it provably never reached DynamoDB (no connection was made) or DynamoDB answered
    with an error of its own (a 4xx: refused, nothing written). So a read timeout, a dropped
    connection, an SSL error while reading the answer, a 5xx, and a 2xx -- one that botocore
    retries anyway (its CRC32 check failed) as much as one that answers the request -- all count.
    """
    if caught_exception is not None:
        return not isinstance(caught_exception, NEVER_SENT)
    status = response[0].status_code if response and response[0] is not None else 0
    return not 400 <= status < 500


@dataclass(slots=True)
class _Attempt:
    """One logical send: how many of botocore's attempts may have landed (``may_have_landed``).
    ``past``: whether the send-by time of this send has passed (None: it has none)."""

    landed: int = 0
    past: Callable[[], bool] | None = None

    @property
    def ambiguous(self) -> bool:
        """Asked of a send that failed (its last answer, if any, was an error): may one of its
        attempts have landed without our hearing back?"""
        return self.landed > 0


_CURRENT: ContextVar[_Attempt | None] = ContextVar("sessionstore_attempt", default=None)
_SEND_BY: ContextVar[Callable[[], bool] | None] = ContextVar("sessionstore_send_by", default=None)


@contextmanager
def send_by(past: Callable[[], bool]) -> Iterator[None]:
    """Within this block no attempt is sent -- botocore's own retries included -- once ``past()``
    says the time is up: the driver checks a deadline once per attempt, but botocore may retry
    one attempt for minutes (its timeouts, its backoff)."""
    reset = _SEND_BY.set(past)
    try:
        yield
    finally:
        _SEND_BY.reset(reset)


def check_send_by(**_: Any) -> None:
    """``before-send`` hook: refuse to send an attempt whose send-by time has passed."""
    attempt = _CURRENT.get()
    if attempt is not None and attempt.past is not None and attempt.past():
        raise NotSent()


def tag_request(context: dict[str, Any], **_: Any) -> None:
    """``before-call`` hook: hand this send's marker to botocore's per-request context."""
    attempt = _CURRENT.get()
    if attempt is not None:
        context[_CONTEXT_KEY] = attempt


def watch_attempt(
    caught_exception: Exception | None = None,
    response: Any = None,
    request_dict: dict[str, Any] | None = None,
    **_: Any,
) -> None:
    """``needs-retry`` hook: count an attempt that may have been applied (``may_have_landed``)."""
    attempt = ((request_dict or {}).get("context") or {}).get(_CONTEXT_KEY)
    if attempt is not None and may_have_landed(caught_exception, response):
        attempt.landed += 1


def install_hooks(client: Any) -> None:
    """Register the two hooks on ``client`` (idempotent)."""
    events = client.meta.events
    events.register("before-call.dynamodb", tag_request, unique_id="sessionstore.tag-request")
    events.register("needs-retry.dynamodb", watch_attempt, unique_id="sessionstore.watch-attempt")
    events.register("before-send.dynamodb", check_send_by, unique_id="sessionstore.send-by")


def engine_lacks(client: Any, exc: ClientError, needed_by: str) -> DynamoDBError:
    """An ``UnknownOperationException`` said as what it is -- an engine implementing part of the
    API (dynalite: no UpdateTimeToLive, no TransactWriteItems) -- not as a refusal."""
    return DynamoDBError(
        "UnknownOperationException",
        f"the engine at {client.meta.endpoint_url} lacks the {exc.operation_name} operation, "
        f"which {needed_by}",
    )


def to_python(item: dict[str, Any] | None) -> dict[str, Any] | None:
    """A low-level item as Python values (numbers as ``Decimal``); None for no item."""
    if not item:
        return None
    return {k: _DESER.deserialize(v) for k, v in item.items()}


class Refused(Exception):
    """Internal: DynamoDB refused the request; nothing of *this* attempt was written.

    ``ambiguous``: an earlier attempt of the same request, retried inside botocore, may have
    been applied without our hearing back -- so the refusal may be our own write's doing.
    """

    def __init__(self, ambiguous: bool) -> None:
        super().__init__()
        self.ambiguous = ambiguous


class ConditionFailed(Refused):
    """Internal: a condition failed; ``old`` is the item as it is (None if absent)."""

    def __init__(self, old: dict[str, Any] | None, ambiguous: bool) -> None:
        super().__init__(ambiguous)
        self.old = old


class Cancelled(Refused):
    """Internal: a transaction was cancelled by a failed condition; one reason per action."""

    def __init__(self, reasons: list[dict[str, Any]], ambiguous: bool) -> None:
        super().__init__(ambiguous)
        self.reasons = reasons

    def failed(self, index: int) -> bool:
        return (
            index < len(self.reasons)
            and self.reasons[index].get("Code") == "ConditionalCheckFailed"
        )

    def old(self, index: int) -> dict[str, Any] | None:
        if index >= len(self.reasons):
            return None
        return to_python(self.reasons[index].get("Item"))


class Contended(Refused):
    """Internal: refused because of concurrent traffic, provably not applied; worth a retry."""

    def __init__(self, code: str, ambiguous: bool) -> None:
        super().__init__(ambiguous)
        self.code = code


def send(
    client: Any, operation: str, request: dict[str, Any], table_name: str, item_size_limit: int
) -> Any:
    """Send one request; translate every failure into our errors.

    A request over one of DynamoDB's documented limits (``limits.check_limits``) is refused
    unsent: ``RequestOverLimit`` (an ``InvalidInput``), ``ItemOverLimit`` for a whole item.

    A write's attempts that may have landed, less the one that answered it (a success is a 2xx
    heard), lost their answers: ``observe.answers_lost`` is told how many when the send ends.
    """
    check_limits(operation, request)
    attempt = _Attempt(past=_SEND_BY.get())
    reset = _CURRENT.set(attempt)
    heard = 0
    try:
        answer = getattr(client, operation)(**request)
        heard = 1
        return answer
    except ClientError as exc:
        response: dict[str, Any] = dict(exc.response)
        code = response.get("Error", {}).get("Code", "")
        message = response.get("Error", {}).get("Message", "")
        if code == "ConditionalCheckFailedException":
            raise ConditionFailed(to_python(response.get("Item")), attempt.ambiguous) from exc
        if code == "TransactionCanceledException":
            reasons = response.get("CancellationReasons", [])
            codes = {r.get("Code") for r in reasons} - {"None", None}
            if codes & _CONTENTION_REASONS:
                # An action refused for contention was never evaluated: its item (a tool
                # call) may well be there, so the other reasons cannot be explained yet.
                raise Contended(f"{code} {sorted(codes)}", attempt.ambiguous) from exc
            if "ConditionalCheckFailed" in codes:
                raise Cancelled(reasons, attempt.ambiguous) from exc
            if any(is_item_size_message(r.get("Message")) for r in reasons):
                raise ItemTooLarge(0, 0, item_size_limit, by_engine=True) from exc
            raise DynamoDBError(code, message, reasons) from exc
        if code == "TransactionConflictException":
            raise Contended(code, attempt.ambiguous) from exc
        if code in THROTTLES or code in SERVER_ERRORS:
            raise Unavailable(
                f"DynamoDB {code} after retries: {message}",
                maybe_applied=operation not in _READ_METHODS and attempt.ambiguous,
            ) from exc
        if code == "ResourceNotFoundException":
            raise TableNotFound(f"table {table_name!r} not found: {message}") from exc
        if code == "UnknownOperationException":
            raise engine_lacks(client, exc, "this store needs") from exc
        if code == "ValidationException" and is_item_size_message(message):
            raise ItemTooLarge(0, 0, item_size_limit, by_engine=True) from exc
        # Any other refusal -- a ValidationException about an expression, say, that slipped past
        # check_limits -- keeps DynamoDB's code and words: it was sent, so not InvalidInput.
        raise DynamoDBError(code, message) from exc
    except NotSent as exc:
        raise Unavailable(
            "not sent: its send-by time had passed (a retry of botocore's, or a late attempt)",
            maybe_applied=attempt.ambiguous,
        ) from exc
    except (BotoConnectionError, HTTPClientError) as exc:
        raise Unavailable(
            f"DynamoDB unreachable after retries: {exc}",
            maybe_applied=operation not in _READ_METHODS and attempt.ambiguous,
        ) from exc
    finally:
        _CURRENT.reset(reset)
        if attempt.landed > heard and operation not in _READ_METHODS:
            observe.answers_lost(attempt.landed - heard)
