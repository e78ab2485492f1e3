"""OpenTelemetry: a span per store operation, and counters of what it cost on the wire.

Through ``opentelemetry-api`` (the MCP SDK brings it; without it this module does nothing).
Spans and measurements go to the global providers -- whatever the application configured with
the OpenTelemetry SDK -- or to the ones given to ``configure``.

Each public operation of ``SessionStore`` (and ``claims.claim``) is one span
``sessionstore.<operation>`` (kind INTERNAL, a child of the current span: the SDK's
``tools/call`` span in a server, since ``AsyncSessionStore`` runs the store on worker threads
with the caller's context). An operation called by another one (``activate`` ->
``transition``, a cold ``record_tool_call`` -> ``get_session``) is folded into the outer span.
Pages that ``context()`` / ``tool_calls()`` read lazily, after the call returned, are spans
``sessionstore.read_page`` of their own.

Span attributes, all set at the end (zeros included): ``db.system.name`` (``aws.dynamodb``),
``db.operation.name`` (the store operation), ``db.collection.name`` (the table, once a request
was sent), ``sessionstore.session_id`` (the caller's own id; never the owner),
``.tool_call_id`` (``record_tool_call`` / ``claim_tool_call``), ``.dynamodb_operations``, each
count of ``Tally`` (``COUNTS``: ``.requests``, ``.write_units`` ...), ``.outcome``, on errors
``error.type`` (the exception's class), and on ``Unavailable`` ``.maybe_applied``. Each count is
also a counter ``sessionstore.<count>``, beside ``sessionstore.operations``, all with
``db.system.name``, ``db.operation.name`` and ``.outcome`` (never a session id).

Outcomes. A refusal that *is* the operation's answer -- a ``SessionStoreError`` other than the
failures below (``SessionNotFound``, ``VersionConflict`` for a stale ``expected_version``,
``ContextFull`` ...) -- sets ``.outcome`` to the class in
snake case (``session_not_found``) and leaves the span's status unset: the store did its job,
and a dashboard of errors should not light up because a client asked for an expired session.
The store failing to do its job -- ``Unavailable``, ``ConflictRetriesExhausted``,
``TableNotFound``, ``DynamoDBError``, or any other exception -- sets status ERROR and
``error.type`` (outcome: its snake-case name, ``error`` for a non-store exception). Exception
messages are never recorded: some carry items as DynamoDB returned them (a cancellation's
reasons), which may be another principal's.

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

Cost when nothing is configured: each operation makes one check (are providers set?) -- about
0.25 us -- and nothing else: the request hooks are installed on a client by the first operation
measured on it, so they never run in a process with telemetry off.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from importlib import metadata as _metadata
from types import SimpleNamespace, TracebackType
from typing import Any, ParamSpec, TypeVar
from weakref import WeakSet

from . import observe, sizing
from .errors import (
    ConflictRetriesExhausted,
    DynamoDBError,
    SessionStoreError,
    TableNotFound,
    Unavailable,
)
from .wire import NEVER_SENT, THROTTLES

try:
    from opentelemetry import context as _otel_context
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
    from opentelemetry.metrics import Counter, MeterProvider
    from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer, TracerProvider

    _OTEL = True
except ImportError:  # pragma: no cover - the core install has no opentelemetry-api
    _OTEL = False

P = ParamSpec("P")
R = TypeVar("R")

SYSTEM = "aws.dynamodb"
#: The installed package's: the instrumentation scope's version, and the MCP server's.
try:
    VERSION = _metadata.version("sessionstore")
except _metadata.PackageNotFoundError:  # pragma: no cover - a source tree not installed
    VERSION = "0+unknown"
PREFIX = "sessionstore."
#: The counts of one operation (``Tally``) and their units; each is a span attribute and a
#: counter ``sessionstore.<name>``.
_UNITS = {
    "requests": "{request}",
    "attempts": "{attempt}",
    "conflicts": "{conflict}",
    "lost_responses": "{response}",
    "lost_responses_settled": "{response}",
    "throttles": "{throttle}",
    "write_units": "{WCU}",
    "read_units": "{RCU}",
}
COUNTS = tuple(_UNITS)
_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
_THROTTLE_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded"})
#: Store errors that mean the store could not do its job (status ERROR); the others answer.
_FAILURES = (Unavailable, ConflictRetriesExhausted, TableNotFound, DynamoDBError)
_PARAMS_KEY = "sessionstore.telemetry.params"


class Tally:
    """What one operation sent and what it cost; the request hooks and the driver add to it."""

    __slots__ = (*COUNTS, "operations", "table")

    def __init__(self) -> None:
        self.requests = 0  # API requests sent (``PutItem`` ...)
        self.attempts = 0  # HTTP attempts, botocore's own retries included
        self.conflicts = 0  # attempts refused by a concurrent writer and retried
        self.lost_responses = 0  # write attempts whose answer was lost (timeout, 5xx)
        # Of those, the ones whose write ended known: applied once, or provably not
        # (``Unavailable(maybe_applied=True)`` settles none).
        self.lost_responses_settled = 0
        # Throttled attempts (and throttled cancellations), those botocore retried included.
        self.throttles = 0
        self.write_units = 0
        self.read_units = 0.0
        self.operations: list[str] = []  # the API names of the requests, in order
        self.table: str | None = None

    # An ``observe.Listener``: the driver reports the writes and conflicts it sees.
    def write_began(self) -> int:
        return self.lost_responses

    def write_ended(self, mark: int, settled: bool) -> None:
        """A write ended; with a known outcome, the responses it lost are settled."""
        if settled:
            self.lost_responses_settled += self.lost_responses - mark

    def conflict(self) -> None:
        self.conflicts += 1


_TALLY: ContextVar[Tally | None] = ContextVar("sessionstore_telemetry", default=None)


def current() -> Tally | None:
    """The tally of the operation running in this context (None: telemetry off, or outside)."""
    return _TALLY.get()


# ---------------------------------------------------------------------------- providers


class _Signals:
    """Where spans and measurements go. With the global providers, the API's proxies (which
    follow a provider set later); ``pinned``: the providers given to ``configure``."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        self.pinned = tracer_provider is not None or meter_provider is not None
        self.tracer: Tracer = _trace.get_tracer(
            "sessionstore", VERSION, tracer_provider=tracer_provider
        )
        meter = _metrics.get_meter("sessionstore", VERSION, meter_provider=meter_provider)
        self.counters: dict[str, Counter] = {
            name: meter.create_counter(
                PREFIX + name,
                unit=unit,
                description=f"sessionstore: {name.replace('_', ' ')} of store operations",
            )
            for name, unit in {"operations": "{operation}", **_UNITS}.items()
        }


# The API keeps each global provider in a module global, set once. The public
# ``get_tracer_provider()`` costs an environment lookup (~1 us) exactly when nothing is
# configured, so the check reads those globals. Where they are not where expected, they count
# as set: every operation goes through the API's proxies (no-ops when nothing is configured,
# only slower).
_UNKNOWN = SimpleNamespace(_TRACER_PROVIDER=True, _METER_PROVIDER=True)
_trace_globals: Any = _UNKNOWN
_metrics_globals: Any = _UNKNOWN
_signals: _Signals | None = None
if _OTEL:
    _signals = _Signals()
    if hasattr(_trace, "_TRACER_PROVIDER"):
        _trace_globals = _trace
    _metrics_internal = getattr(_metrics, "_internal", None)
    if hasattr(_metrics_internal, "_METER_PROVIDER"):
        _metrics_globals = _metrics_internal


def configure(
    *, tracer_provider: TracerProvider | None = None, meter_provider: MeterProvider | None = None
) -> None:
    """Send spans and measurements to these providers rather than the global ones (tests; an
    application that keeps its providers out of the globals). ``configure()``: back to the
    global providers."""
    global _signals
    if not _OTEL:  # pragma: no cover
        raise RuntimeError("sessionstore.telemetry needs opentelemetry-api")
    _signals = _Signals(tracer_provider, meter_provider)


def enabled() -> bool:
    """The one check an operation makes: providers given to ``configure``, or a global tracer
    or meter provider set?"""
    signals = _signals
    return signals is not None and (
        signals.pinned
        or _trace_globals._TRACER_PROVIDER is not None
        or _metrics_globals._METER_PROVIDER is not None
    )


# ---------------------------------------------------------------------------- operations


_NOOP: AbstractContextManager[None] = nullcontext()


class _Operation:
    """One operation's span and tally, current in this context while it runs."""

    __slots__ = ("_context_token", "_listening", "_name", "_tally_token", "span", "tally")

    def __init__(
        self, name: str, session_id: str | None, tool_call_id: str | None, client: Any
    ) -> None:
        assert _signals is not None
        if client is not None and client not in _INSTRUMENTED:
            install_hooks(client)
        attributes: dict[str, Any] = {"db.system.name": SYSTEM, "db.operation.name": name}
        if session_id is not None:
            attributes[PREFIX + "session_id"] = session_id
        if tool_call_id is not None:
            attributes[PREFIX + "tool_call_id"] = tool_call_id
        self._name = name
        self.span: Span = _signals.tracer.start_span(
            PREFIX + name, kind=SpanKind.INTERNAL, attributes=attributes
        )
        self.tally = Tally()

    def __enter__(self) -> _Operation:
        self._context_token = _otel_context.attach(_trace.set_span_in_context(self.span))
        self._tally_token = _TALLY.set(self.tally)
        self._listening = observe.listening(self.tally)
        self._listening.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._listening.__exit__(None, None, None)
        _TALLY.reset(self._tally_token)
        _otel_context.detach(self._context_token)
        tally = self.tally
        span = self.span
        outcome, error = _outcome(exc)
        if span.is_recording():
            attributes: dict[str, Any] = {PREFIX + name: getattr(tally, name) for name in COUNTS}
            attributes[PREFIX + "outcome"] = outcome
            attributes[PREFIX + "dynamodb_operations"] = tally.operations
            if tally.table is not None:
                attributes["db.collection.name"] = tally.table
            if isinstance(exc, Unavailable):
                attributes[PREFIX + "maybe_applied"] = exc.maybe_applied
            if error is not None:
                attributes["error.type"] = error
                span.set_status(StatusCode.ERROR, error)
            span.set_attributes(attributes)
        span.end()
        assert _signals is not None
        counters = _signals.counters
        labels = {"db.system.name": SYSTEM, "db.operation.name": self._name}
        labels[PREFIX + "outcome"] = outcome
        counters["operations"].add(1, labels)
        for name in COUNTS:
            value = getattr(tally, name)
            if value:
                counters[name].add(value, labels)


def operation(
    name: str, session_id: str | None = None, tool_call_id: str | None = None, *, client: Any = None
) -> AbstractContextManager[Any]:
    """``with operation("read_page", session_id, client=client):`` -- a span and a tally for
    the requests ``client`` sends inside; nothing (a shared no-op) when telemetry is off or
    another operation is already current."""
    if _TALLY.get() is not None or not enabled():
        return _NOOP
    return _Operation(name, session_id, tool_call_id, client)


def traced(name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Make every call of the decorated function an operation ``name``; its ``session_id`` and
    ``tool_call_id`` parameters (by name, positional or keyword) become span attributes. The
    requests measured are those of the first argument's ``client`` (``self``, or the store)."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        parameters = list(inspect.signature(fn).parameters)

        def argument(key: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
            if key not in parameters:
                return None
            position = parameters.index(key)
            value = args[position] if position < len(args) else kwargs.get(key)
            return value if isinstance(value, str) else None

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            if _TALLY.get() is not None or not enabled():
                return fn(*args, **kwargs)
            session_id = argument("session_id", args, kwargs)
            tool_call_id = argument("tool_call_id", args, kwargs)
            client = getattr(args[0], "client", None) if args else None
            with _Operation(name, session_id, tool_call_id, client) as op:
                result = fn(*args, **kwargs)
                # ``create_session`` without an id: the session is learnt from the result.
                learnt = getattr(result, "session_id", None)
                if session_id is None and isinstance(learnt, str):
                    op.span.set_attribute(PREFIX + "session_id", learnt)
            return result

        return wrapper

    return decorate


def _outcome(exc: BaseException | None) -> tuple[str, str | None]:
    """``(outcome, error.type)``: what the operation answered; its class if it failed."""
    if exc is None:
        return "ok", None
    error = type(exc).__qualname__
    if not isinstance(exc, (SessionStoreError, *_FAILURES)):
        return "error", error
    return _snake_case(type(exc).__name__), error if isinstance(exc, _FAILURES) else None


@functools.cache
def _snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


# ---------------------------------------------------------------------------- request hooks


_INSTRUMENTED: WeakSet[Any] = WeakSet()


def install_hooks(client: Any) -> None:
    """Count requests and attempts and size them, on ``client`` (idempotent). Once installed,
    they read one context variable and return outside a measured operation."""
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
    answers (returns None): botocore's retry decision is its own."""
    tally = _TALLY.get()
    if tally is None:
        return
    tally.attempts += 1
    name: str = getattr(operation, "name", "")
    write = name not in _READS
    params: dict[str, Any] = ((request_dict or {}).get("context") or {}).get(_PARAMS_KEY) or {}
    http, parsed = response if response is not None else (None, None)
    status = getattr(http, "status_code", 0)
    parsed = parsed if isinstance(parsed, dict) else {}
    if caught_exception is not None or status >= 500:
        # A write that may have reached DynamoDB: lost. A read lost is only retried.
        if write and not isinstance(caught_exception, NEVER_SENT):
            tally.lost_responses += 1
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
        if codes & _THROTTLE_REASONS:
            tally.throttles += 1
        elif "ConditionalCheckFailed" in codes and "TransactionConflict" not in codes:
            tally.write_units += _write_units(name, params, {}, reasons)


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
