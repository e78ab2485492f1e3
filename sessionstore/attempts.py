"""The attempt driver: one loop for every write.

A write is a *plan*: pure request building (``request``) and pure interpretation of what came
back (``succeeded`` / ``refused``), with no sending and no sleeping. ``drive`` owns attempts,
backoff, settling lost responses and the ending, so every write ends the same way:

* the plan's result, when an attempt succeeded or a refusal proved the work already done;
* a typed error raised by the plan's interpreter (not found, expired, conflict ...);
* ``Unavailable(maybe_applied=True)`` when attempts ran out (or a fault outlived botocore's
  retries) while some attempt may have landed unseen;
* ``Unavailable(maybe_applied=False)`` when a fault or contention ended it and nothing landed;
* the plan's ``exhausted()`` error (``ConflictRetriesExhausted``) only when every attempt was
  provably refused on a version conflict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, NoReturn, Protocol, TypeVar

from . import telemetry
from .clock import Clock
from .errors import DynamoDBError, SessionStoreError, Unavailable
from .retry import RetryPolicy
from .telemetry import Tally
from .wire import Cancelled, ConditionFailed, Contended, Refused

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

#: When botocore's own retries give up on a write whose outcome is unknown, re-send it (same
#: token) at most this many times to settle the outcome. A plain fault fails fast: botocore has
#: already retried it, and stacking our retries on its retries multiplies the load.
SETTLE_RESENDS = 2


class Retry:
    """What ``Plan.refused`` returns to ask for another attempt (the refusal was provable)."""

    __slots__ = ()


RETRY = Retry()


def gave_up(what: str, attempts: int) -> Unavailable:
    """A plan's ``exhausted`` when its refusals are never conflicts: the driver reports faults
    and contention itself, so this ending is only reached in theory; it stays typed."""
    return Unavailable(f"{what}: gave up after {attempts} attempts", maybe_applied=False)


class Plan(Protocol[R_co]):
    """One logical write. Implementations keep what they learn (a newer version, the item as
    it is) between attempts; they never send or sleep."""

    operation: str

    def request(self, now_ms: int) -> dict[str, Any]:
        """The request for the next attempt."""

    def succeeded(self, response: dict[str, Any]) -> R_co:
        """The result of an attempt that DynamoDB accepted."""

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> R_co | Retry:
        """Explain a failed condition: the result (our work is already there, or there is
        nothing to do), ``RETRY``, or raise the typed error. Returning ``RETRY`` asserts that
        no earlier attempt of this plan landed."""

    def maybe_landed(self) -> None:
        """The attempt just sent may have been applied without our hearing back."""

    def exhausted(self, attempts: int) -> SessionStoreError:
        """The error for running out of attempts, every one of them provably refused."""


class Driver(Generic[R]):
    """The state of one write across its attempts; ``drive`` runs it synchronously."""

    __slots__ = ("cause", "last", "plan", "resends", "uncertain", "what")

    def __init__(self, plan: Plan[R], what: str) -> None:
        self.plan = plan
        self.what = what
        self.uncertain = False  # some attempt may have landed and nothing has proven otherwise
        self.resends = 0
        self.last: str = "conflict"
        self.cause: Unavailable | None = None  # the last fault, shown as the ending's cause

    def outcome(self, failure: Refused | Unavailable, now_ms: int) -> R | Retry:
        """Fold one failed attempt into the state: the result, ``RETRY``, or raise."""
        self.cause = None
        if isinstance(failure, Refused) and failure.ambiguous:
            self._maybe_landed()
        if isinstance(failure, ConditionFailed | Cancelled):
            try:
                verdict = self.plan.refused(failure, now_ms)
            except DynamoDBError as exc:  # unexplained: cannot rule out an earlier landing
                self.fail(exc)
            if isinstance(verdict, Retry):
                self.uncertain = False  # the plan proved no earlier attempt landed
                self.last = "conflict"
            return verdict
        if isinstance(failure, Contended):
            self.last = f"contended ({failure.code})"
            return RETRY
        assert isinstance(failure, Unavailable)
        if not failure.maybe_applied:
            self.fail(failure)
        self._maybe_landed()
        if self.resends >= SETTLE_RESENDS:
            raise self.unknown(str(failure)) from failure
        self.resends += 1
        self.last = "lost response"
        self.cause = failure
        return RETRY

    def ending(self, attempts: int) -> SessionStoreError:
        if self.uncertain:
            return self.unknown(f"gave up after {attempts} attempts")
        if self.last == "conflict":
            return self.plan.exhausted(attempts)
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

    def _maybe_landed(self) -> None:
        self.uncertain = True
        self.plan.maybe_landed()


def drive(
    plan: Plan[R],
    send: Callable[[str, dict[str, Any]], Any],
    clock: Clock,
    retry: RetryPolicy,
    what: str,
) -> R:
    """Run ``plan`` to its ending (see the module docstring). ``what`` names the write in
    error messages."""
    tally = telemetry.current()
    # The responses lost on the way (counted by the request hooks) are settled by any ending
    # but "an attempt may have landed".
    lost = 0 if tally is None else tally.lost_responses
    settled = True
    try:
        return _drive(plan, send, clock, retry, what, tally)
    except Unavailable as exc:
        settled = not exc.maybe_applied
        raise
    finally:
        if tally is not None and settled:
            tally.settled_since(lost)


def _drive(
    plan: Plan[R],
    send: Callable[[str, dict[str, Any]], Any],
    clock: Clock,
    retry: RetryPolicy,
    what: str,
    tally: Tally | None,
) -> R:
    driver = Driver(plan, what)
    for attempt in range(retry.max_attempts):
        now_ms = clock.now_ms()
        failure: Refused | Unavailable
        try:
            result = send(plan.operation, plan.request(now_ms))
        except (Refused, Unavailable) as exc:
            failure = exc
        except SessionStoreError as exc:  # e.g. refused as too large, an unexpected code
            driver.fail(exc)
        else:
            return plan.succeeded(result)
        # Interpreted outside the ``except``: a typed error must not arrive chained to an
        # internal exception the caller never raised.
        verdict = driver.outcome(failure, now_ms)
        if not isinstance(verdict, Retry):
            return verdict
        if tally is not None and _conflict(failure):
            tally.conflicts += 1
        if attempt + 1 < retry.max_attempts:
            retry.backoff(attempt)
    raise driver.ending(retry.max_attempts) from driver.cause


def _conflict(failure: Refused | Unavailable) -> bool:
    """A retried attempt was refused by a concurrent writer (a version or a transaction
    conflict); a throttled cancellation is a throttle, counted where it was seen."""
    if isinstance(failure, Contended):
        return "TransactionConflict" in failure.code
    return isinstance(failure, ConditionFailed | Cancelled)
