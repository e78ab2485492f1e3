"""A claimed call's later rounds: each taken once, a round's answer kept for a re-sent round,
and the lease renewed while its tool waits for the client.

Layer: a pattern module over ``claims`` (the claim and its conditions) and ``tool_calls`` (the
call item); the MCP layer runs a multi-round-trip call through it.

A multi-round-trip call (a tool answering ``InputRequiredResult``) keeps its claim across
rounds: each later round is taken once (``start_round``), and a round that asks the client for
input leaves that answer in the item (``suspend_round``), so a round re-sent after a lost
response gets it again instead of running again.

A claimed call is "in progress" until its lease is over, and "outcome unknown" after it
(``claims``): the lease bounds how long a tool may run. A tool that asks the client for input
(sampling, elicitation) spends that time waiting for an answer, and several asks together can
outlast any lease -- a retry would then be told "outcome unknown" while the tool still runs.
So while it waits, the lease is renewed: ``renew`` sets ``leaseUntil`` to now plus the lease,
one UpdateItem (1 WCU: a claimed item holds no input or output yet), on

* the claim still ours and not completed (its token, ``state = claimed``), at the round it
  holds: a renewal never takes another delivery's claim, nor reopens a recorded call;
* the lease still running: a lease that ran out stays out, so a repeat once told "outcome
  unknown" is never contradicted;
* the call's time not up (TTL deletes late).

Refused, it returns None: the lease is no longer this delivery's to keep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import sizing
from .claims import Claim, ClaimItem, ClaimUpdate, Item, Outcome, State, standing
from .conditions import Condition, Name, Value, absent, assign, clause, equals, remove
from .errors import SessionExpired
from .table import Table
from .tool_calls import CallItem, call_live
from .wire import Cancelled, ConditionFailed

__all__ = ["MAX_SUSPENDED_BYTES", "renew", "start_round", "suspend_round"]

#: A round's answer larger than this is not kept: a re-sent round is then told "in progress".
MAX_SUSPENDED_BYTES = 64 * 1024


def round_is(number: int) -> Condition:
    """A multi-round-trip call is at round ``number`` (the first: no round yet)."""
    return absent(ClaimItem.ROUND) if number == 1 else equals(ClaimItem.ROUND, number)


@dataclass(frozen=True, slots=True)
class StartRound(ClaimUpdate[Item | None]):
    """Take round ``round`` (2, 3, ...) of the call ``claim`` holds: one UpdateItem; None when
    it is ours, else the item as the refusal showed it (``{}``: gone). A sealed
    ``requestState`` proves the round was issued, not that it has not run, so it is claimed
    like the call was: ``round`` moves from ``round - 1`` only while the call is still claimed,
    and the delivery's own token beside it tells its lost response from a rival's. The lease
    is renewed: a rival is told "in progress" while this round runs."""

    round: int
    delivery: str
    lease_ms: int

    def request(self, now_ms: int) -> dict[str, Any]:
        # The previous round's suspension is no longer an answer: the client has moved on.
        update = (
            assign(ClaimItem.ROUND, self.round)
            + assign(ClaimItem.ROUND_TOKEN, self.delivery)
            + assign(ClaimItem.LEASE_UNTIL, now_ms + self.lease_ms)
            + remove(Name(ClaimItem.SUSPENDED), Name(ClaimItem.SUSPENDED_ROUND))
        )
        return self.on_claim(update, call_live(now_ms // 1000) & round_is(self.round - 1))

    def succeeded(self, response: dict[str, Any], now_ms: int) -> Item | None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Item | None:
        assert isinstance(failure, ConditionFailed)
        old = failure.old or {}
        ours = old.get(ClaimItem.ROUND_TOKEN) == self.delivery  # our attempt landed
        return None if ours else old


@dataclass(frozen=True, slots=True)
class SuspendRound(ClaimUpdate[None]):
    """Keep round ``round``'s answer -- it asked the client for input -- in the call item, the
    round still ours: a client that lost it and sends the round again gets it again (sealed
    afresh by the SDK), not a call that can no longer finish. The next round removes it."""

    round: int
    answer: str  # the ``InputRequiredResult`` as JSON text

    def request(self, now_ms: int) -> dict[str, Any]:
        kept = assign(ClaimItem.SUSPENDED, self.answer)
        kept += assign(ClaimItem.SUSPENDED_ROUND, self.round)
        return self.on_claim(kept, round_is(self.round))

    def succeeded(self, response: dict[str, Any], now_ms: int) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> None:
        return None  # the round is no longer ours to answer for: nothing to keep


@dataclass(frozen=True, slots=True)
class RenewLease(ClaimUpdate[int | None]):
    """Move the lease of the call ``claim`` holds, at round ``round``, to ``lease_ms`` from
    now: the new ``leaseUntil`` (epoch ms), or None when refused (module docstring)."""

    round: int
    lease_ms: int

    def request(self, now_ms: int) -> dict[str, Any]:
        running = clause("lease_running", "{} > {}", Name(ClaimItem.LEASE_UNTIL), Value(now_ms))
        condition = round_is(self.round) & running & call_live(now_ms // 1000)
        return self.on_claim(assign(ClaimItem.LEASE_UNTIL, now_ms + self.lease_ms), condition)

    def succeeded(self, response: dict[str, Any], now_ms: int) -> int | None:
        return now_ms + self.lease_ms

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> int | None:
        # A renewal of ours whose response was lost leaves the lease running, so a retry of it
        # passes its condition again: a refusal always means the lease is no longer ours.
        return None


def renew(table: Table, claimed: Claim, round_number: int, *, lease_ms: int) -> int | None:
    """Renew the lease of the call ``claimed`` holds (round ``round_number``) for ``lease_ms``:
    one ``RenewLease``. Its new end (epoch ms), or None when it is no longer ours to renew."""
    if claimed.token is None or round_number < 1:
        raise ValueError("a lease is renewed for its claim, with its token")
    plan = RenewLease(table.name, claimed, round_number, lease_ms)
    return table.drive(plan, f"lease of tool call {claimed.tool_call_id!r}")


def start_round(table: Table, claimed: Claim, round_number: int, *, lease_ms: int) -> Outcome:
    """Take round ``round_number`` (2, 3, ...) of the call ``claimed`` holds, or say why not:
    one ``StartRound``. A round already taken is answered like a repeat of the call (``answer``);
    ``SessionExpired`` when the item is gone, past its ttl or holds another claim."""
    if claimed.token is None or round_number < 2:
        raise ValueError("a later round needs its call's claim, with its token")
    plan = StartRound(table.name, claimed, round_number, table.token(), lease_ms)
    held = table.drive(plan, f"round {round_number} of tool call {claimed.tool_call_id!r}")
    if held is None:
        return Outcome(State.CLAIMED, claimed)
    now_ms = table.now_ms()
    if (
        held.get(ClaimItem.CLAIM_TOKEN) != claimed.token
        or int(held[CallItem.TTL]) <= now_ms // 1000
    ):
        raise SessionExpired(claimed.session_id, claimed.ttl)
    return standing(held, Claim.from_item(held), round_number, now_ms)


def suspend_round(table: Table, claimed: Claim, round_number: int, answer_json: str) -> None:
    """Keep round ``round_number``'s ``InputRequiredResult`` (JSON text) for a re-sent round:
    one ``SuspendRound``, unless it is too large to keep (``MAX_SUSPENDED_BYTES``)."""
    if claimed.token is None or sizing.text_size(answer_json) > MAX_SUSPENDED_BYTES:
        return
    plan = SuspendRound(table.name, claimed, round_number, answer_json)
    table.drive(plan, f"suspension of tool call {claimed.tool_call_id!r}")
