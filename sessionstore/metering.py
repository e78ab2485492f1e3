"""Metering: what one store operation sent to DynamoDB and what it cost, counted per request.

Layer: an observer, under ``telemetry`` (which turns a ``Tally`` into span attributes and
counters) and over ``wire`` (whose classification of DynamoDB's answers -- ``READS``,
``THROTTLES``, ``THROTTLE_REASONS``, ``may_have_landed`` -- it counts by), ``sizing`` and
``observe``. Nothing in the write path imports it. Why: the counts are fed by botocore hooks of
their own and by what the driver and the wire report through ``observe``, so the write path
neither knows nor pays for them; kept apart from ``telemetry`` because they are arithmetic on
requests, not OpenTelemetry.

The counts (``COUNTS``): ``requests`` (API requests), ``attempts`` (HTTP attempts, botocore's
retries included), ``conflicts`` (attempts refused by a concurrent writer and retried),
``lost_responses`` (a write's attempts that may have landed -- ``wire.may_have_landed``, the rule
``Unavailable.maybe_applied`` is decided by -- and whose answer never reached us; the wire
reports them, ``observe.answers_lost``), ``lost_responses_settled`` (of those, the ones whose
write ended with a known outcome), ``throttles``, ``write_units`` and ``read_units``.

Units are computed per HTTP attempt from what was sent and what came back, by DynamoDB's rules
(``sizing``); a ``ConditionCheck`` is billed as a write. A refused conditional write (or a
transaction cancelled by a condition) is billed; a write whose answer was lost is billed as if
it landed; throttled, contended and never-sent attempts are not, nor is a lost read.
Approximations: an item DynamoDB does not return is sized from the request alone -- an
``UpdateItem`` that succeeded is billed on the item after it (``ALL_NEW``: the metadata item
changes by a few bytes per write, so only a KB boundary crossed by a shrinking write is
missed), and a ``ConditionCheck`` (or a transactional update) that passed is billed as a 1 KB
item (the metadata item takes at most ``METADATA_OVERHEAD``, 4,311 B; the attributes, in an
item of their own, at most about 4 KiB); a lost ``UpdateItem`` (nothing came back) counts 1
unit. Only the operations the store sends are sized.

The request hooks are installed on a client by the first operation measured on it; once
installed, they read one context variable and return outside a measured operation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from weakref import WeakSet

from . import observe, sizing
from .wire import READS, THROTTLE_REASONS, THROTTLES, may_have_landed

#: The counts of one operation (``Tally``) and their units.
UNITS = {
    "requests": "{request}",
    "attempts": "{attempt}",
    "conflicts": "{conflict}",
    "lost_responses": "{response}",
    "lost_responses_settled": "{response}",
    "throttles": "{throttle}",
    "write_units": "{WCU}",
    "read_units": "{RCU}",
}
COUNTS = tuple(UNITS)
_PARAMS_KEY = "sessionstore.telemetry.params"


class Tally:
    """What one operation sent and what it cost; the request hooks, the driver and the wire
    (the last two through ``observe``) add to it."""

    __slots__ = (*COUNTS, "operations", "table")

    def __init__(self) -> None:
        self.requests = 0  # API requests sent (``PutItem`` ...)
        self.attempts = 0  # HTTP attempts, botocore's own retries included
        self.conflicts = 0  # attempts refused by a concurrent writer and retried
        # Write attempts that may have landed (the wire's rule) whose answer was lost.
        self.lost_responses = 0
        # Of those, the ones whose write ended known: applied once, or provably not
        # (``Unavailable(maybe_applied=True)`` settles none).
        self.lost_responses_settled = 0
        # Throttled attempts (and throttled cancellations), those botocore retried included.
        self.throttles = 0
        self.write_units = 0
        self.read_units = 0.0
        self.operations: list[str] = []  # the API names of the requests, in order
        self.table: str | None = None

    # An ``observe.Listener``: the driver and the wire report the writes they see.
    def write_began(self) -> int:
        return self.lost_responses

    def write_ended(self, mark: int, settled: bool) -> None:
        """A write ended; with a known outcome, the responses it lost are settled."""
        if settled:
            self.lost_responses_settled += self.lost_responses - mark

    def conflict(self) -> None:
        self.conflicts += 1

    def answers_lost(self, count: int) -> None:
        self.lost_responses += count


_TALLY: ContextVar[Tally | None] = ContextVar("sessionstore_telemetry", default=None)


def current() -> Tally | None:
    """The tally of the operation running in this context (None: telemetry off, or outside)."""
    return _TALLY.get()


@contextmanager
def measuring(tally: Tally) -> Iterator[None]:
    """Within this block ``tally`` is current: the request hooks, the driver and the wire add
    to it."""
    reset = _TALLY.set(tally)
    try:
        with observe.listening(tally):
            yield
    finally:
        _TALLY.reset(reset)


# ---------------------------------------------------------------------------- request hooks


_INSTRUMENTED: WeakSet[Any] = WeakSet()


def instrumented(client: Any) -> bool:
    """Are the request hooks installed on ``client``?"""
    return client in _INSTRUMENTED


def install_hooks(client: Any) -> None:
    """Count requests and attempts and size them, on ``client`` (idempotent)."""
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is None:  # not a botocore client (a test double): nothing to hook
        return
    # ``before-parameter-build`` rather than ``provide-client-params``: botocore already has
    # handlers on it, so one more costs only its call (~0.5 us less per request when off).
    events.register(
        "before-parameter-build.dynamodb", _on_request, unique_id="sessionstore.telemetry-request"
    )
    events.register("needs-retry.dynamodb", _on_attempt, unique_id="sessionstore.telemetry-attempt")
    _INSTRUMENTED.add(client)


def _on_request(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    """``before-parameter-build``: once per API call, before botocore's own retries."""
    tally = _TALLY.get()
    if tally is None:
        return
    tally.requests += 1
    tally.operations.append(model.name)
    context[_PARAMS_KEY] = params
    if tally.table is None:
        tally.table = _table(params)


def _on_attempt(
    response: Any = None,
    operation: Any = None,
    caught_exception: Exception | None = None,
    request_dict: dict[str, Any] | None = None,
    **_: Any,
) -> None:
    """``needs-retry``: once per HTTP attempt, whether botocore retries it or not. Never
    answers (returns None): botocore's retry decision is its own. The lost answers are not
    counted here but where the wire reports them (``Tally.answers_lost``): only the wire knows
    which attempt answered the request."""
    tally = _TALLY.get()
    if tally is None:
        return
    tally.attempts += 1
    name: str = getattr(operation, "name", "")
    write = name not in READS
    params: dict[str, Any] = ((request_dict or {}).get("context") or {}).get(_PARAMS_KEY) or {}
    http, parsed = response if response is not None else (None, None)
    status = getattr(http, "status_code", 0)
    parsed = parsed if isinstance(parsed, dict) else {}
    if caught_exception is not None or status >= 500:
        # Nothing came back to bill by: a write that may have landed is billed as if it did.
        if write and may_have_landed(caught_exception, response):
            tally.write_units += _write_units(name, params, {}, None)
        return
    code = parsed.get("Error", {}).get("Code") if status >= 400 else None
    if code is None and not write:
        tally.read_units += _read_units(name, params, parsed)
    elif code is None or code == "ConditionalCheckFailedException":  # a refusal is billed too
        tally.write_units += _write_units(name, params, parsed, None)
    elif code in THROTTLES:
        tally.throttles += 1
    elif code == "TransactionCanceledException":
        reasons = parsed.get("CancellationReasons") or []
        codes = {r.get("Code") for r in reasons}
        if codes & THROTTLE_REASONS:
            tally.throttles += 1
        elif "ConditionalCheckFailed" in codes and "TransactionConflict" not in codes:
            tally.write_units += _write_units(name, params, {}, reasons)


# ---------------------------------------------------------------------------- units


def _table(params: dict[str, Any]) -> str | None:
    table = params.get("TableName")
    if table is None and params.get("TransactItems"):
        (action,) = params["TransactItems"][0].values()
        table = action.get("TableName")
    return table if isinstance(table, str) else None


def _size(item: Any) -> int:
    return sizing.item_size(item) if item else 0


def _write_units(
    name: str, params: dict[str, Any], parsed: dict[str, Any], reasons: list[dict[str, Any]] | None
) -> int:
    """Write units of one attempt; ``parsed``: what came back (``{}`` if nothing did);
    ``reasons``: a cancelled transaction's, one per action (with ALL_OLD items)."""
    if name == "TransactWriteItems":
        units = 0
        for index, action in enumerate(params.get("TransactItems", ())):
            ((kind, body),) = action.items()
            old = reasons[index].get("Item") if reasons and index < len(reasons) else None
            # Only a Put's item is known from the request.
            size = max(_size(body.get("Item")) if kind == "Put" else 0, _size(old))
            units += sizing.write_units(size, transactional=True)
        return units
    if name in ("PutItem", "UpdateItem", "DeleteItem"):
        old = parsed.get("Item") or parsed.get("Attributes")  # ALL_OLD refused / ALL_NEW
        return sizing.write_units(max(_size(params.get("Item")), _size(old)))
    return 0


def _read_units(name: str, params: dict[str, Any], parsed: dict[str, Any]) -> float:
    consistent = bool(params.get("ConsistentRead"))
    if name == "GetItem":
        return sizing.read_units(_size(parsed.get("Item")), consistent=consistent)
    if name == "Query":
        items = parsed.get("Items") or ()
        return sizing.query_read_units(map(_size, items), consistent=consistent)
    return 0.0
