"""The table every pattern works on: its name and client, the clock, the ids, the retry policy,
this instance's memory of it, and the one loop that drives a write's attempts.

Layer: under the pattern modules, over ``wire`` and ``memory``. Why: a pattern module is
straight-line code -- validate, build a plan, ``table.drive`` it, remember, return -- over one
explicit object, and everything about *sending* lives here, once.

A write is a *plan* (``Plan``): it builds a request and interprets what came back, without
sending, sleeping or state; a refusal that calls for another attempt returns ``Again(next
plan)``. ``drive`` owns attempts, backoff, settling lost responses and the ending:

* the plan's result, when an attempt succeeded or a refusal proved the work already done;
* a typed error raised by the plan's interpreter (not found, expired, conflict ...);
* ``Unavailable(maybe_applied=True)`` when attempts or faults ended it and one may have landed;
* ``Unavailable(maybe_applied=False)`` when a fault or contention ended it and nothing landed;
* the plan's ``exhausted`` error when every attempt was provably refused by a condition.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, NoReturn, TypeVar

from . import observe, sizing
from .clock import Clock
from .conditions import Name, Request, Value, clause
from .errors import DynamoDBError, InvalidInput, SessionStoreError, Unavailable
from .ids import IdFactory, validate_token
from .memory import Memory
from .retry import RetryPolicy
from .wire import Cancelled, ConditionFailed, Contended, Refused, install_hooks, send, to_python

__all__ = ["Again", "Plan", "Table"]

R = TypeVar("R")
#: What ``Table.query`` sends each page's request in.
PageScope = Callable[[], AbstractContextManager[Any]]

#: Re-sends (same token) of a write whose outcome botocore's retries left unknown. A plain fault
#: fails fast: botocore has retried it already, and retries on retries multiply the load.
SETTLE_RESENDS = 2


@dataclass(frozen=True, slots=True)
class Again(Generic[R]):
    """What ``Plan.refused`` returns to ask for another attempt, with what it learnt in the
    next plan. Returning it asserts that no earlier attempt of this write landed."""

    plan: Plan[R]


class Plan(Generic[R]):
    """One logical write, immutable. Subclasses are frozen dataclasses."""

    operation: ClassVar[str]

    def request(self, now_ms: int) -> dict[str, Any]:
        """The request for this attempt."""
        raise NotImplementedError

    def succeeded(self, response: dict[str, Any], now_ms: int) -> R:
        """The result of an attempt that DynamoDB accepted."""
        raise NotImplementedError

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> R | Again[R]:
        """Explain a failed condition: the result (our work is already there), ``Again``, or
        raise the typed error."""
        raise NotImplementedError

    def exhausted(self, what: str, attempts: int) -> SessionStoreError:
        """The error for running out of attempts, every one provably refused by a condition."""
        return Unavailable(f"{what}: gave up after {attempts} attempts", maybe_applied=False)


@dataclass(frozen=True, slots=True)
class Table:
    """The table, its client and what every write needs, validated when built; ``memory`` is
    this instance's hints about the table's sessions (``Memory``), the one mutable part."""

    client: Any
    name: str
    clock: Clock
    ids: IdFactory
    retry: RetryPolicy
    item_size_limit: int = sizing.MAX_ITEM_BYTES
    memory: Memory = field(default_factory=Memory, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidInput("table_name must be a non-empty string")
        install_hooks(self.client)

    @property
    def landing_s(self) -> int:
        """How long after botocore sends a request it may still land: the client's connect and
        read timeouts (seconds, rounded up)."""
        config = self.client.meta.config
        return math.ceil((config.connect_timeout or 0) + (config.read_timeout or 0))

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def token(self) -> str:
        return validate_token(self.ids.token())

    def send(self, operation: str, request: dict[str, Any]) -> Any:
        return send(self.client, operation, request, self.name, self.item_size_limit)

    def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        """One strongly consistent GetItem; the item python-typed, or None."""
        request = {"TableName": self.name, "Key": key, "ConsistentRead": True}
        return to_python(self.send("get_item", request).get("Item"))

    def query(
        self, pk: str, low: str, high: str, *, each_page: PageScope | None = None
    ) -> Iterator[dict[str, Any]]:
        """The partition's items with ``low <= sk <= high`` in key order, python-typed, one
        strongly consistent Query page at a time (lazily). ``each_page``: a scope each page's
        request is sent in (a page read after the operation returned is measured on its own)."""
        r, keys = Request(), (Name("pk"), Value(pk), Name("sk"), Value(low), Value(high))
        between = clause("range", "{} = {} AND {} BETWEEN {} AND {}", *keys).render(r)
        request = {"TableName": self.name, "KeyConditionExpression": between, **r.params()}
        request["ConsistentRead"] = True
        while True:
            with each_page() if each_page is not None else nullcontext():
                response = self.send("query", request)
            for item in response.get("Items", []):
                yield to_python(item) or {}
            if "LastEvaluatedKey" not in response:
                return
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def drive(self, plan: Plan[R], what: str) -> R:
        """Run ``plan`` to its ending (the module docstring). ``what`` names the write in error
        messages."""
        mark = observe.write_began()
        settled = True
        try:
            return _Attempts(self, what).run(plan)
        except Unavailable as exc:
            settled = not exc.maybe_applied
            raise
        finally:
            observe.write_ended(mark, settled)


class _Attempts:
    """One write's attempts: whether some may have landed, and how the last one ended."""

    __slots__ = ("cause", "last", "resends", "table", "uncertain", "what")

    def __init__(self, table: Table, what: str) -> None:
        self.table = table
        self.what = what
        self.uncertain = False  # some attempt may have landed and nothing has proven otherwise
        self.resends = 0
        self.last = "conflict"
        self.cause: Unavailable | None = None  # the last fault, shown as the ending's cause

    def run(self, plan: Plan[R]) -> R:
        retry = self.table.retry
        for attempt in range(retry.max_attempts):
            now_ms = self.table.now_ms()
            failure: Refused | Unavailable
            try:
                response = self.table.send(plan.operation, plan.request(now_ms))
            except (Refused, Unavailable) as exc:
                failure = exc
            except SessionStoreError as exc:  # e.g. refused as too large, an unexpected code
                self.fail(exc)
            else:
                return plan.succeeded(response, now_ms)
            # Interpreted outside the ``except``: a typed error must not arrive chained to an
            # internal exception the caller never raised.
            verdict = self.outcome(plan, failure, now_ms)
            if not isinstance(verdict, Again):
                return verdict
            plan = verdict.plan
            if _conflict(failure):
                observe.conflict()
            if attempt + 1 < retry.max_attempts:
                retry.backoff(attempt)
        raise self.ending(plan, retry.max_attempts) from self.cause

    def outcome(self, plan: Plan[R], failure: Refused | Unavailable, now_ms: int) -> R | Again[R]:
        """Fold one failed attempt in: the result, ``Again``, or raise."""
        self.cause = None
        if isinstance(failure, Refused) and failure.ambiguous:
            self.uncertain = True
        if isinstance(failure, ConditionFailed | Cancelled):
            try:
                verdict = plan.refused(failure, now_ms)
            except DynamoDBError as exc:  # unexplained: cannot rule out an earlier landing
                self.fail(exc)
            if isinstance(verdict, Again):
                self.uncertain = False  # the plan proved no earlier attempt landed
                self.last = "conflict"
            return verdict
        if isinstance(failure, Contended):
            self.last = f"contended ({failure.code})"
            return Again(plan)
        assert isinstance(failure, Unavailable)
        if not failure.maybe_applied:
            self.fail(failure)
        self.uncertain = True
        if self.resends >= SETTLE_RESENDS:
            raise self.unknown(str(failure)) from failure
        self.resends += 1
        self.last = "lost response"
        self.cause = failure
        return Again(plan)

    def ending(self, plan: Plan[Any], attempts: int) -> SessionStoreError:
        if self.uncertain:
            return self.unknown(f"gave up after {attempts} attempts")
        if self.last == "conflict":
            return plan.exhausted(self.what, attempts)
        return Unavailable(
            f"{self.what}: gave up after {attempts} attempts, the last {self.last}; "
            "nothing was written",
            maybe_applied=False,
        )

    def fail(self, exc: SessionStoreError) -> NoReturn:
        """End on ``exc`` -- as ``unknown`` when an earlier attempt may have landed unseen."""
        if self.uncertain:
            raise self.unknown(str(exc)) from exc
        raise exc

    def unknown(self, why: str) -> Unavailable:
        return Unavailable(
            f"{self.what}: {why}; an attempt may have been applied and its outcome is unknown",
            maybe_applied=True,
        )


def _conflict(failure: Refused | Unavailable) -> bool:
    """A retried attempt was refused by a concurrent writer (a version or a transaction
    conflict); a throttled cancellation is a throttle, counted where it was seen."""
    if isinstance(failure, Contended):
        return "TransactionConflict" in failure.code
    return isinstance(failure, ConditionFailed | Cancelled)
