"""A claim's lease, renewed while its tool waits for the client.

Layer: a pattern module over ``claims`` (the claim and its conditions) and ``tool_calls`` (the
call item); the MCP layer's ``leases`` renews through it.

Why: a claimed call is "in progress" until its lease is over, and "outcome unknown" after it
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
from typing import Any, ClassVar

from . import tool_calls
from .claims import Claim, round_is, still_claimed
from .conditions import Name, Value, assign, clause, update_item
from .table import Plan, Table
from .tool_calls import CallItem, call_key
from .wire import Cancelled, ConditionFailed


@dataclass(frozen=True, slots=True)
class RenewLease(Plan[int | None]):
    """Move the lease of the call ``claim`` holds, at round ``round``, to ``lease_ms`` from
    now: the new ``leaseUntil`` (epoch ms), or None when refused (module docstring)."""

    table: str
    claim: Claim
    round: int
    lease_ms: int

    operation: ClassVar[str] = "update_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        running = clause("lease_running", "{} > {}", Name(CallItem.LEASE_UNTIL), Value(now_ms))
        condition = (
            still_claimed(self.claim)
            & round_is(self.round)
            & running
            & tool_calls.call_live(now_ms // 1000)
        )
        key = call_key(self.claim.session_id, self.claim.tool_call_id)
        update = assign(CallItem.LEASE_UNTIL, now_ms + self.lease_ms)
        return update_item(self.table, key, update, condition, returns=None)

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


__all__ = ["RenewLease", "renew"]
