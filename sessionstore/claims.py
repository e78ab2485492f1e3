"""Tool-call claims: "this call is being executed", written *before* the tool runs.

Layer: a pattern module over ``tool_calls`` (the call item and its writes); the MCP extension
runs these operations on its store's ``table``, each measured (``mcp.traced``).

Two deliveries of one call (a client retry after a lost response, two clients racing, two
instances behind a load balancer) must not both run the tool. The call item is put ``claimed``
first (``claim``); whoever's put lands executes, and the result is then written into the same
item (``complete``, on the claim's token). Every other delivery is answered from the item its
refused put returns (ALL_OLD), with no read (``answer``):

======================================  =================================================
the item under the id                   answer (``State``)
======================================  =================================================
none, or expired                        ``CLAIMED``: ours, run the tool
ours (our token: a lost response)       ``CLAIMED``: ours, run the tool
another request (tool or arguments)     ``ToolCallConflict``
recorded                                ``RECORDED``: the stored result, not run again
claimed, asking the client for input    ``SUSPENDED``: the round's stored answer again
claimed, lease running                  ``IN_PROGRESS``: ask again later
claimed, lease over, never recorded     ``UNKNOWN``: it may or may not have run; never again
======================================  =================================================

A multi-round-trip call (a tool answering ``InputRequiredResult``) keeps its claim across
rounds, each taken once, and has its lease renewed while its tool waits for the client
(``round_trips``): "in progress" lasts as long as the wait.

A tool that is harmless to run twice (read-only or idempotent, by the server's own
annotations) is not claimed: its result is put once, recorded, by ``put_record`` (one PutItem).

Cost on a warm instance, small payloads: a fresh call 1 ``TransactWriteItems`` (2 + 2 WCU) and
1 ``UpdateItem`` (1 WCU); a repeat 1 request; a harmless call 1 PutItem (1 WCU), all within the
least-privilege policy. Nothing is deleted: the item expires with the session (its ``ttl``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import Any, ClassVar, TypeVar

from . import codec, sizing, tool_calls
from .clock import format_timestamp
from .codec import JSON
from .conditions import (
    TRUE,
    Condition,
    Field,
    Name,
    Update,
    assign,
    equals,
    item_to_wire,
    put_item,
    remove,
    update_item,
)
from .errors import ItemTooLarge, SessionExpired, ToolCallConflict
from .ids import MAX_ID_LENGTH, validate_id
from .models import ToolCallRecord
from .table import Again, Plan, Table
from .tool_calls import (
    CallItem,
    CallState,
    Put,
    call_item,
    call_key,
    id_free,
    record_from_item,
    record_size,
    state_of,
)
from .wire import Cancelled, ConditionFailed

__all__ = [
    "Claim",
    "ClaimItem",
    "Outcome",
    "State",
    "answer",
    "claim",
    "complete",
    "put_record",
]

R = TypeVar("R")
Item = Mapping[str, Any]  # a call item, python-typed
CLAIMED, RECORDED = CallState.CLAIMED.value, CallState.RECORDED.value


class ClaimItem(Field):
    """A claimed call item's own attributes, beside the call's (``tool_calls.CallItem``)."""

    CLAIM_TOKEN = "claimToken"  # the claim's token, kept once the result is in
    LEASE_UNTIL = "leaseUntil"  # epoch ms: "in progress" until then; removed with the result
    ROUND = "round"  # the round a multi-round-trip call has reached; absent: the first
    ROUND_TOKEN = "roundToken"  # the delivery that took that round
    SUSPENDED = "suspended"  # the answer of a round that asked the client for input
    SUSPENDED_ROUND = "suspendedRound"  # the round that answer belongs to


#: What a claimed call's item may hold beside its record, at their widest: the claim's token and
#: lease (an engine may size the item before it is removed), a later round's number and token.
CLAIM_FIELDS: dict[str, Any] = {
    ClaimItem.CLAIM_TOKEN: "x" * MAX_ID_LENGTH,
    ClaimItem.LEASE_UNTIL: int("9" * 38),
    ClaimItem.ROUND: int("9" * 38),
    ClaimItem.ROUND_TOKEN: "x" * MAX_ID_LENGTH,
}
_CLAIMED_OVERHEAD = tool_calls.record_overhead(CLAIM_FIELDS)


class State(Enum):
    """Where a delivery of a tool-call id stands (the table in the module docstring)."""

    CLAIMED = "claimed"  # the claim is ours: run the tool
    RECORDED = "recorded"  # finished and recorded: return the stored result
    SUSPENDED = "suspended"  # the round asked the client for input: that answer again
    IN_PROGRESS = "in_progress"  # claimed by another delivery whose lease still runs
    UNKNOWN = "unknown"  # claimed, lease over, nothing recorded: it may or may not have run


@dataclass(frozen=True, slots=True)
class Claim:
    """A call item as a claim; ``token`` and ``lease_until_ms`` are None for a call recorded
    without one (a harmless tool, ``record_tool_call``)."""

    session_id: str
    tool_call_id: str
    tool_name: str
    fingerprint: str
    token: str | None
    lease_until_ms: int | None
    ttl: int

    @classmethod
    def from_item(cls, item: Item) -> Claim:
        lease = item.get(ClaimItem.LEASE_UNTIL)
        return cls(
            session_id=item[CallItem.SESSION_ID],
            tool_call_id=item[CallItem.TOOL_CALL_ID],
            tool_name=item[CallItem.TOOL_NAME],
            fingerprint=item[CallItem.FINGERPRINT],
            token=item.get(ClaimItem.CLAIM_TOKEN),
            lease_until_ms=None if lease is None else int(lease),
            ttl=int(item[CallItem.TTL]),
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer to "may I run this call?": ``state`` and what goes with it."""

    state: State
    claim: Claim
    record: ToolCallRecord | None = None
    suspended: str | None = None  # ``SUSPENDED``: the round's answer (JSON text)


def answer(existing: Item, fingerprint: str, token: str, now_ms: int) -> Outcome:
    """What the (live) item holding the id says to a delivery with ``token``."""
    state = state_of(existing)  # DynamoDBError for an item this store did not write
    held = Claim.from_item(existing)
    if held.token == token:
        return Outcome(State.CLAIMED, held)  # our own put landed; its response was lost
    if held.fingerprint != fingerprint:
        stored = record_from_item(existing) if state is CallState.RECORDED else None
        raise ToolCallConflict(held.session_id, held.tool_call_id, stored)
    return standing(existing, held, 1, now_ms)


def standing(existing: Item, held: Claim, round_number: int, now_ms: int) -> Outcome:
    """Where the call in ``existing`` stands for a delivery of round ``round_number`` that may
    not run: finished, suspended after that very round, running, or of unknown outcome."""
    if state_of(existing) is CallState.RECORDED:
        return Outcome(State.RECORDED, held, record_from_item(existing))
    if (
        ClaimItem.SUSPENDED in existing
        and int(existing.get(ClaimItem.SUSPENDED_ROUND, 0)) == round_number
    ):
        return Outcome(State.SUSPENDED, held, suspended=str(existing[ClaimItem.SUSPENDED]))
    if held.lease_until_ms is not None and now_ms < held.lease_until_ms:
        return Outcome(State.IN_PROGRESS, held)
    return Outcome(State.UNKNOWN, held)


def still_claimed(claim: Claim) -> Condition:
    """The call is claimed, by ``claim`` (its token), and not completed yet."""
    return equals(ClaimItem.CLAIM_TOKEN, claim.token) & equals(CallItem.STATE, CLAIMED)


@dataclass(frozen=True, slots=True)
class ClaimUpdate(Plan[R]):
    """An UpdateItem of the call item ``claim`` holds, on the claim still being ours: the base
    of the writes a claim's holder makes (its completion, a later round, its lease)."""

    table: str
    claim: Claim

    operation: ClassVar[str] = "update_item"

    def on_claim(self, update: Update, condition: Condition = TRUE) -> dict[str, Any]:
        key = call_key(self.claim.session_id, self.claim.tool_call_id)
        condition = still_claimed(self.claim) & condition
        return update_item(self.table, key, update, condition, returns=None)


@dataclass(frozen=True, slots=True)
class CompleteToolCall(ClaimUpdate[None]):
    """Write the result into the call ``claim`` holds: one UpdateItem, on the claim still
    being ours. ``fields`` (python-typed): a recorded call's. The claim's token stays in the
    item, so a retry whose first response was lost finds its own result there."""

    fields: dict[str, Any]

    def request(self, now_ms: int) -> dict[str, Any]:
        update = Update()
        for name, value in self.fields.items():
            update += assign(name, value)
        return self.on_claim(update + remove(Name(ClaimItem.LEASE_UNTIL)))

    def succeeded(self, response: dict[str, Any], now_ms: int) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> None:
        assert isinstance(failure, ConditionFailed)
        old = failure.old or {}
        if (
            old.get(ClaimItem.CLAIM_TOKEN) == self.claim.token
            and old.get(CallItem.STATE) == RECORDED
        ):
            return None  # our own completion landed; its response was lost
        # TTL removed the claim (the session's time ran out while the tool ran), or the id was
        # taken again, which only an expired item allows: this incarnation is over.
        raise SessionExpired(self.claim.session_id, self.claim.ttl)


@dataclass(frozen=True, slots=True)
class PutRecord(Plan[Put]):
    """A harmless call's record, ``held`` with ``fields``: one PutItem if the id is free; no
    transaction re-checks the session (read just before): a re-run would change nothing."""

    table: str
    held: dict[str, Any]
    fields: dict[str, Any]

    operation: ClassVar[str] = "put_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        return put_item(self.table, item_to_wire(self.held | self.fields), id_free(now_ms // 1000))

    def succeeded(self, response: dict[str, Any], now_ms: int) -> Put:
        return Put(self.held | self.fields)

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Put | Again[Put]:
        assert isinstance(failure, ConditionFailed)
        if failure.old is None:
            return Again(self)  # gone between the check and now: the id is free again
        return Put(failure.old, taken=True)


def _too_large(text: str) -> str:
    return codec.encode({"tooLarge": {"bytes": sizing.text_size(text)}}, "")


def _drive_result(
    table: Table,
    held: Item,
    result: tuple[JSON, JSON, int],
    plan: Callable[[dict[str, Any]], Plan[R]],
    what: str,
) -> R:
    """Drive ``plan`` with the fields a call's ``result`` (arguments, output, duration) adds
    to its item ``held``, in the fullest form that fits the item size limit. A repeat is
    answered from the fingerprint and the output, never the input, so the input goes first:
    past the limit it is kept as ``{"tooLarge": {"bytes": N}}``; then the output (delivered
    this once; a repeat is told it was too large to keep). The smallest form always fits, and
    a value JSON cannot hold is kept as why (``codec.kept``): a run is never lost to its size or
    form. An engine that still finds a form too large (its own count, a field we did not
    foresee) gets the next one."""
    arguments, output, duration_ms = result
    i, o = codec.kept(arguments, "input"), codec.kept(output, "output")
    forms = ((i, o), (_too_large(i), o), (_too_large(i), _too_large(o)))
    at, limit = held[CallItem.CALLED_AT], table.item_size_limit
    fields = [tool_calls.recorded_fields(*form, duration_ms, at) for form in forms]
    fitting = [f for f in fields if record_size({**held, **f}, limit, _CLAIMED_OVERHEAD) is None]
    assert fitting, "a record without its input and output always fits"
    for form in fitting[:-1]:
        with suppress(ItemTooLarge):
            return table.drive(plan(form), what)
    return table.drive(plan(fitting[-1]), what)


# ---------------------------------------------------------------------------- the operations


def claim(
    table: Table,
    session_id: str,
    tool_call_id: str,
    tool_name: str,
    arguments: JSON,
    *,
    owner: str | None,
    ttl: int,
    lease_ms: int,
) -> Outcome:
    """Claim ``tool_call_id`` for one execution (a new token, a lease of ``lease_ms``) or say
    why not: one ``PutToolCall``. ``ttl``: the session's as the caller knows it (a stale one
    costs a retry). ``SessionNotFound`` (another owner's too), ``SessionExpired``,
    ``SessionNotActive``, ``ToolCallConflict``; a repeat is answered even once closed."""
    validate_id(session_id, "session_id")
    validate_id(tool_call_id, "tool_call_id")
    fingerprint = tool_calls.fingerprint(tool_name, arguments)
    token, now_ms = table.token(), table.now_ms()
    at = format_timestamp(now_ms)
    item = call_item(session_id, tool_call_id, tool_name, fingerprint, at, ttl)
    item |= {
        CallItem.STATE: CLAIMED,
        ClaimItem.CLAIM_TOKEN: token,
        ClaimItem.LEASE_UNTIL: now_ms + lease_ms,
    }
    plan = tool_calls.PutToolCall(table.name, session_id, owner, item, exact_ttl=True)
    put = table.drive(plan, f"claim of tool call {tool_call_id!r} of session {session_id!r}")
    if put.learnt is not None:
        table.memory.remember(put.learnt)
    if not put.taken:
        return Outcome(State.CLAIMED, Claim.from_item(put.item))
    return answer(put.item, fingerprint, token, table.now_ms())


def complete(
    table: Table,
    session_id: str,
    tool_call_id: str,
    claimed: Claim,
    arguments: JSON,
    output: JSON,
    duration_ms: int,
) -> None:
    """Write the result of the call ``claimed`` (this delivery's claim) into its item: one
    ``CompleteToolCall``, too large an input or output kept as its size (``_drive_result``).
    ``SessionExpired`` when the item is gone, or the id was taken again since the claim expired."""
    same_call = (claimed.session_id, claimed.tool_call_id) == (session_id, tool_call_id)
    if claimed.token is None or not same_call:
        raise ValueError("complete needs this call's claim, with its token")
    at = format_timestamp(table.now_ms())
    held = call_item(
        session_id, tool_call_id, claimed.tool_name, claimed.fingerprint, at, claimed.ttl
    )
    held |= CLAIM_FIELDS  # what the item may hold beside the result, at their widest
    plan = partial(CompleteToolCall, table.name, claimed)
    what = f"completion of tool call {tool_call_id!r}"
    _drive_result(table, held, (arguments, output, duration_ms), plan, what)


def put_record(
    table: Table,
    session_id: str,
    tool_call_id: str,
    tool_name: str,
    arguments: JSON,
    output: JSON,
    duration_ms: int,
    *,
    ttl: int,
) -> Outcome | None:
    """Record a harmless call (no claim), the session read just before: one ``PutRecord``.
    None when this put stored it; otherwise the ``Outcome`` the item under the id gives (a
    different request raises ``ToolCallConflict``)."""
    fingerprint = tool_calls.fingerprint(tool_name, arguments)
    at = format_timestamp(table.now_ms())
    held = call_item(session_id, tool_call_id, tool_name, fingerprint, at, ttl)
    plan = partial(PutRecord, table.name, held)
    what = f"record of tool call {tool_call_id!r}"
    put = _drive_result(table, held, (arguments, output, duration_ms), plan, what)
    if not put.taken:
        return None
    return answer(put.item, fingerprint, "", table.now_ms())
