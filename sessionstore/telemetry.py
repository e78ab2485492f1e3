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

The counts and how units are computed: ``metering``.

Layer: the top, an observer. The facade (``store``) and the MCP layer (``mcp.traced``, over
``claims``) decorate their operations with ``traced``; nothing in the write path (``table``,
``wire``, ``observe``) imports it. Why: a span is a view of the work, not part of it -- the
driver and the wire report through ``observe``, and a process without OpenTelemetry runs the
same writes.

Cost when nothing is configured: each operation makes one check (are providers set?) through the
API's public getters -- a few microseconds, the environment lookups they make while no provider
is set -- and nothing else: the request hooks are installed on a client by the first operation
measured on it, so they never run in a process with telemetry off.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from importlib import metadata as _metadata
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from .errors import (
    ConflictRetriesExhausted,
    DynamoDBError,
    SessionStoreError,
    TableNotFound,
    Unavailable,
)
from .metering import COUNTS, UNITS, Tally, current, install_hooks, instrumented, measuring

__all__ = [
    "PREFIX",
    "SYSTEM",
    "configure",
    "enabled",
    "operation",
    "traced",
]

try:
    from opentelemetry import context as _otel_context
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
    from opentelemetry.metrics import Counter, MeterProvider
    from opentelemetry.trace import (
        ProxyTracerProvider,
        Span,
        SpanKind,
        StatusCode,
        Tracer,
        TracerProvider,
    )

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
#: Store errors that mean the store could not do its job (status ERROR); the others answer.
_FAILURES = (Unavailable, ConflictRetriesExhausted, TableNotFound, DynamoDBError)


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
            for name, unit in {"operations": "{operation}", **UNITS}.items()
        }


# While no global provider is set, the API's getters return a proxy provider (and a provider,
# once set, is never replaced). The tracer's proxy class is public; the meter's is not
# (``_ProxyMeterProvider``), so it is looked up by the API's own spelling, and where it is not
# found a global meter provider counts as set: every operation then goes through the API's
# proxies (no-ops when nothing is configured, only slower).
_unset_meters: type = type(None)
_signals: _Signals | None = None
if _OTEL:
    _signals = _Signals()
    _unset_meters = getattr(getattr(_metrics, "_internal", None), "_ProxyMeterProvider", type(None))


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
        or not isinstance(_trace.get_tracer_provider(), ProxyTracerProvider)
        or not isinstance(_metrics.get_meter_provider(), _unset_meters)
    )


# ---------------------------------------------------------------------------- operations


_NOOP: AbstractContextManager[None] = nullcontext()


class _Operation:
    """One operation's span and tally, current in this context while it runs."""

    __slots__ = ("_context_token", "_measuring", "_name", "span", "tally")

    def __init__(
        self, name: str, session_id: str | None, tool_call_id: str | None, client: Any
    ) -> None:
        assert _signals is not None
        if client is not None and not instrumented(client):
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
        self._measuring = measuring(self.tally)
        self._measuring.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._measuring.__exit__(None, None, None)
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
    if current() is not None or not enabled():
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
            if current() is not None or not enabled():
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
