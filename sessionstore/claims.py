"""Tool-call claims: "this call is being executed", written *before* the tool runs.

Layer: a pattern module over ``tool_calls`` (the call item and its writes); the MCP extension
calls these operations with its store's backend and table.memory.

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
rounds: each later round is taken once (``start_round``), and a round that asks the client for
input leaves that answer in the item (``suspend_round``), so a round re-sent after a lost
response gets it again instead of running again. A tool waiting for the client's answers has its
lease renewed meanwhile (``leases``): "in progress" lasts as long as the wait.

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
from .conditions import Condition, Name, Update, absent, assign, equals, remove, update_item
from .errors import ItemTooLarge, SessionExpired, ToolCallConflict
from .ids import validate_id
from .models import ToolCallRecord
from .table import Plan, Table
from .tool_calls import CallItem, CallState, call_item, call_key, record_from_item, state_of
from .wire import Cancelled, ConditionFailed

R = TypeVar("R")
Item = Mapping[str, Any]  # a call item, python-typed
CLAIMED, RECORDED = CallState.CLAIMED.value, CallState.RECORDED.value

#: A round's answer larger than this is not kept: a re-sent round is then told "in progress".
MAX_SUSPENDED_BYTES = 64 * 1024


def call_fingerprint(tool_name: str, arguments: JSON) -> str:
    """What makes two deliveries "the same call": the tool and its arguments. ``InvalidInput``,
    before the claim, for arguments the completion could not write (NaN, ``1e400`` parsed as
    an infinity, a lone surrogate, too deep): such a call never runs."""
    return codec.fingerprint(codec.encode(tool_name, "tool_name"), arguments, what="arguments")


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
        lease = item.get(CallItem.LEASE_UNTIL)
        return cls(
            session_id=item[CallItem.SESSION_ID],
            tool_call_id=item[CallItem.TOOL_CALL_ID],
            tool_name=item[CallItem.TOOL_NAME],
            fingerprint=item[CallItem.FINGERPRINT],
            token=item.get(CallItem.CLAIM_TOKEN),
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
    return _standing(existing, held, 1, now_ms)


def _standing(existing: Item, held: Claim, round_number: int, now_ms: int) -> Outcome:
    """Where the call in ``existing`` stands for a delivery of round ``round_number`` that may
    not run: finished, suspended after that very round, running, or of unknown outcome."""
    if state_of(existing) is CallState.RECORDED:
        return Outcome(State.RECORDED, held, record_from_item(existing))
    if (
        CallItem.SUSPENDED in existing
        and int(existing.get(CallItem.SUSPENDED_ROUND, 0)) == round_number
    ):
        return Outcome(State.SUSPENDED, held, suspended=str(existing[CallItem.SUSPENDED]))
    if held.lease_until_ms is not None and now_ms < held.lease_until_ms:
        return Outcome(State.IN_PROGRESS, held)
    return Outcome(State.UNKNOWN, held)


def still_claimed(claim: Claim) -> Condition:
    """The call is claimed, by ``claim`` (its token), and not completed yet."""
    return equals(CallItem.CLAIM_TOKEN, claim.token) & equals(CallItem.STATE, CLAIMED)


def round_is(number: int) -> Condition:
    """A multi-round-trip call is at round ``number`` (the first: no round yet)."""
    return absent(CallItem.ROUND) if number == 1 else equals(CallItem.ROUND, number)


@dataclass(frozen=True, slots=True)
class CompleteToolCall(Plan[None]):
    """Write the result into the call ``claim`` holds: one UpdateItem, on the claim still
    being ours. ``fields`` (python-typed): a recorded call's. The claim's token stays in the
    item, so a retry whose first response was lost finds its own result there."""

    table: str
    claim: Claim
    fields: dict[str, Any]

    operation: ClassVar[str] = "update_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        update = Update()
        for name, value in self.fields.items():
            update += assign(name, value)
        update += remove(Name(CallItem.LEASE_UNTIL))
        key = call_key(self.claim.session_id, self.claim.tool_call_id)
        return update_item(self.table, key, update, still_claimed(self.claim), returns=None)

    def succeeded(self, response: dict[str, Any], now_ms: int) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> None:
        assert isinstance(failure, ConditionFailed)
        old = failure.old or {}
        if (
            old.get(CallItem.CLAIM_TOKEN) == self.claim.token
            and old.get(CallItem.STATE) == RECORDED
        ):
            return None  # our own completion landed; its response was lost
        # TTL removed the claim (the session's time ran out while the tool ran), or the id was
        # taken again, which only an expired item allows: this incarnation is over.
        raise SessionExpired(self.claim.session_id, self.claim.ttl)


@dataclass(frozen=True, slots=True)
class StartRound(Plan[Item | None]):
    """Take round ``round`` (2, 3, ...) of the call ``claim`` holds: one UpdateItem; None when
    it is ours, else the item as the refusal showed it (``{}``: gone). A sealed
    ``requestState`` proves the round was issued, not that it has not run, so it is claimed
    like the call was: ``round`` moves from ``round - 1`` only while the call is still claimed,
    and the delivery's own token beside it tells its lost response from a rival's. The lease
    is renewed: a rival is told "in progress" while this round runs."""

    table: str
    claim: Claim
    round: int
    delivery: str
    lease_ms: int

    operation: ClassVar[str] = "update_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        # The previous round's suspension is no longer an answer: the client has moved on.
        update = (
            assign(CallItem.ROUND, self.round)
            + assign(CallItem.ROUND_TOKEN, self.delivery)
            + assign(CallItem.LEASE_UNTIL, now_ms + self.lease_ms)
            + remove(Name(CallItem.SUSPENDED), Name(CallItem.SUSPENDED_ROUND))
        )
        live = tool_calls.call_live(now_ms // 1000)
        condition = still_claimed(self.claim) & live & round_is(self.round - 1)
        key = call_key(self.claim.session_id, self.claim.tool_call_id)
        return update_item(self.table, key, update, condition, returns=None)

    def succeeded(self, response: dict[str, Any], now_ms: int) -> Item | None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Item | None:
        assert isinstance(failure, ConditionFailed)
        old = failure.old or {}
        return None if old.get(CallItem.ROUND_TOKEN) == self.delivery else old  # None: ours, landed


@dataclass(frozen=True, slots=True)
class SuspendRound(Plan[None]):
    """Keep round ``round``'s answer -- it asked the client for input -- in the call item, the
    round still ours: a client that lost it and sends the round again gets it again (sealed
    afresh by the SDK), not a call that can no longer finish. The next round removes it."""

    table: str
    claim: Claim
    round: int
    answer: str  # the ``InputRequiredResult`` as JSON text

    operation: ClassVar[str] = "update_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        update = assign(CallItem.SUSPENDED, self.answer) + assign(
            CallItem.SUSPENDED_ROUND, self.round
        )
        condition = still_claimed(self.claim) & round_is(self.round)
        key = call_key(self.claim.session_id, self.claim.tool_call_id)
        return update_item(self.table, key, update, condition, returns=None)

    def succeeded(self, response: dict[str, Any], now_ms: int) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> None:
        return None  # the round is no longer ours to answer for: nothing to keep


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
    fitting = [f for f in fields if tool_calls.record_size({**held, **f}, limit) is None]
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
    fingerprint = call_fingerprint(tool_name, arguments)
    token, now_ms = table.token(), table.now_ms()
    at = format_timestamp(now_ms)
    item = call_item(session_id, tool_call_id, tool_name, fingerprint, at, ttl)
    item |= {
        CallItem.STATE: CLAIMED,
        CallItem.CLAIM_TOKEN: token,
        CallItem.LEASE_UNTIL: now_ms + lease_ms,
    }
    plan = tool_calls.PutToolCall(table.name, session_id, owner, item, exact_ttl=True)
    put = table.drive(plan, f"claim of tool call {tool_call_id!r} of session {session_id!r}")
    if put.learnt is not None:
        table.memory.remember(put.learnt)
    if not put.taken:
        return Outcome(State.CLAIMED, Claim.from_item(put.item))
    return answer(put.item, fingerprint, token, table.now_ms())


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
    if held.get(CallItem.CLAIM_TOKEN) != claimed.token or int(held[CallItem.TTL]) <= now_ms // 1000:
        raise SessionExpired(claimed.session_id, claimed.ttl)
    return _standing(held, Claim.from_item(held), round_number, now_ms)


def suspend_round(table: Table, claimed: Claim, round_number: int, answer_json: str) -> None:
    """Keep round ``round_number``'s ``InputRequiredResult`` (JSON text) for a re-sent round:
    one ``SuspendRound``, unless it is too large to keep (``MAX_SUSPENDED_BYTES``)."""
    if claimed.token is None or sizing.text_size(answer_json) > MAX_SUSPENDED_BYTES:
        return
    plan = SuspendRound(table.name, claimed, round_number, answer_json)
    table.drive(plan, f"suspension of tool call {claimed.tool_call_id!r}")


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
    held |= tool_calls.CLAIM_FIELDS  # what the item may hold beside the result, at their widest
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
    fingerprint = call_fingerprint(tool_name, arguments)
    at = format_timestamp(table.now_ms())
    held = call_item(session_id, tool_call_id, tool_name, fingerprint, at, ttl)
    plan = partial(tool_calls.PutRecord, table.name, held)
    what = f"record of tool call {tool_call_id!r}"
    put = _drive_result(table, held, (arguments, output, duration_ms), plan, what)
    if not put.taken:
        return None
    return answer(put.item, fingerprint, "", table.now_ms())
