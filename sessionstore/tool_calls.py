"""Idempotent tool calls: one item per call, put once, completed in place.

Layer: a pattern module, over ``table`` (its ``memory`` inside); ``claims`` builds on it.

A tool call is one item at ``tool#<id>`` in its session's partition (``CallItem``); the id is
the idempotency key, stable across retries, instances and time. The item is ``claimed`` (put
*before* the tool runs by ``claims.claim``) or ``recorded`` (``CallState``).

Every first write of a call is one ``PutToolCall``: a ``TransactWriteItems`` of

1. an Update of the metadata item, whose condition says the session is alive and the caller's
   (``item.alive``), ``active``, and has the ``ttl`` the call carries (equal when it came from
   the session: a re-created session costs a retry, never a call that expires with another
   incarnation; at least, when ``ttl_seconds`` chose it). Its only change moves the idle
   deadline on (``item.idle_moved``): a call keeps an idle session alive. An Update rather
   than a ConditionCheck for that: same request, same write units, same ALL_OLD on a refusal;
2. a Put of the call item if the id is free (``id_free``): no item, or only one whose time is
   up -- TTL deletes late, and once a call's time is up its id is free again.

Both actions return ``ALL_OLD`` when refused, so one refused request says why -- and a repeat
is answered from the item it returns, with no read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from . import codec, reads, schema, sizing, validate
from .clock import format_timestamp
from .codec import JSON
from .conditions import (
    Condition,
    Field,
    Name,
    Value,
    absent,
    check,
    clause,
    item_to_wire,
    put_item,
    update_item,
)
from .errors import DynamoDBError, InvalidInput, ItemTooLarge, SessionNotActive, ToolCallConflict
from .ids import MAX_ID_LENGTH, validate_id
from .item import WIDEST_TTL, Meta, alive, idle_ahead, idle_moved, live, session_from_item
from .lifecycle import status_is
from .models import Session, Status, ToolCallRecord
from .table import Again, Plan, Table
from .wire import Cancelled, ConditionFailed

__all__ = [
    "Call",
    "CallItem",
    "CallState",
    "call_key",
    "fingerprint",
    "history",
    "id_free",
    "read_history",
    "record",
]


class CallItem(Field):
    """A call item's attributes: what every call has, then a recorded call's; a claimed call
    has more (``claims.ClaimItem``)."""

    PK = "pk"
    SK = "sk"  # ``tool#<id>``
    SESSION_ID = "sessionId"
    TOOL_CALL_ID = "toolCallId"
    TOOL_NAME = "toolName"
    FINGERPRINT = "fingerprint"  # a digest of the request: the tool name and its input
    CALLED_AT = "calledAt"
    TTL = "ttl"  # epoch seconds: the session's, never later
    STATE = "state"  # ``CallState``
    INPUT = "input"  # JSON text
    OUTPUT = "output"  # JSON text
    DURATION_MS = "durationMs"
    RECORDED_AT = "recordedAt"


class CallState(Enum):
    """Where a call item stands."""

    CLAIMED = "claimed"  # written before the tool ran; no result yet
    RECORDED = "recorded"  # the result is in the item


_STATES = {s.value: s for s in CallState}
_FIELDS = frozenset(
    {
        CallItem.SESSION_ID,
        CallItem.TOOL_CALL_ID,
        CallItem.TOOL_NAME,
        CallItem.FINGERPRINT,
        CallItem.TTL,
    }
)


def call_item(
    session_id: str, tool_call_id: str, tool_name: str, fingerprint: str, called_at: str, ttl: int
) -> dict[str, Any]:
    """What every call item holds (python-typed); a state and its fields are added to it.
    ``fingerprint``: a repeat of the request gets the stored answer, another is a conflict."""
    return {
        CallItem.PK: schema.pk(session_id),
        CallItem.SK: schema.tool_sk(tool_call_id),
        CallItem.SESSION_ID: session_id,
        CallItem.TOOL_CALL_ID: tool_call_id,
        CallItem.TOOL_NAME: tool_name,
        CallItem.FINGERPRINT: fingerprint,
        CallItem.CALLED_AT: called_at,
        CallItem.TTL: ttl,
    }


def call_key(session_id: str, tool_call_id: str) -> dict[str, Any]:
    return {
        CallItem.PK: {"S": schema.pk(session_id)},
        CallItem.SK: {"S": schema.tool_sk(tool_call_id)},
    }


def recorded_fields(
    input_text: str, output_text: str, duration_ms: int, recorded_at: str
) -> dict[str, Any]:
    """The fields a recorded call adds to its item (python-typed)."""
    return {
        CallItem.STATE: CallState.RECORDED.value,
        CallItem.INPUT: input_text,
        CallItem.OUTPUT: output_text,
        CallItem.DURATION_MS: duration_ms,
        CallItem.RECORDED_AT: recorded_at,
    }


def state_of(item: Mapping[str, Any]) -> CallState:
    """Where the call item (python-typed) stands; ``DynamoDBError`` for an item in the
    ``tool#`` range this store did not write (a field missing)."""
    state = _STATES.get(item.get(CallItem.STATE, ""))
    if state is None or not _FIELDS.issubset(item):
        raise DynamoDBError(
            "UnexpectedItem", f"{item.get(CallItem.SK)!r}: not written by this store"
        )
    return state


def record_from_item(item: Mapping[str, Any]) -> ToolCallRecord:
    """A recorded call item (python-typed) as a ``ToolCallRecord``."""
    return ToolCallRecord(
        session_id=item[CallItem.SESSION_ID],
        tool_call_id=item[CallItem.TOOL_CALL_ID],
        tool_name=item[CallItem.TOOL_NAME],
        input=codec.decode(item[CallItem.INPUT]),
        output=codec.decode(item[CallItem.OUTPUT]),
        duration_ms=int(item[CallItem.DURATION_MS]),
        recorded_at=item[CallItem.RECORDED_AT],
        ttl=int(item[CallItem.TTL]),
    )


def history(items: Iterable[Mapping[str, Any]], now_s: int) -> list[ToolCallRecord]:
    """The recorded calls among ``items`` whose ttl has not passed, in order of recording (a
    claim is not history). Expired ones are left out: DynamoDB deletes them late and one at a
    time, so what a reader sees must not depend on when its sweeper ran."""
    recorded = [
        item
        for item in items
        if state_of(item) is CallState.RECORDED and int(item[CallItem.TTL]) > now_s
    ]
    recorded.sort(key=lambda item: (item[CallItem.RECORDED_AT], item[CallItem.TOOL_CALL_ID]))
    return [record_from_item(item) for item in recorded]


# ---------------------------------------------------------------------------- its size


def record_overhead(extra: Mapping[str, Any] | None = None) -> int:
    """The most bytes a recorded item holds besides its tool name, input and output texts, with
    the fields of ``extra`` (at their widest) beside them."""
    stamp = format_timestamp(0)  # always 24 characters
    widest = call_item("x" * MAX_ID_LENGTH, "x" * MAX_ID_LENGTH, "", "x" * 64, stamp, WIDEST_TTL)
    widest |= recorded_fields("", "", int("9" * 38), stamp) | dict(extra or {})
    return sizing.item_size(item_to_wire(widest))


_RECORD_OVERHEAD = record_overhead()


def record_size(
    item: Mapping[str, Any], limit: int, overhead: int = _RECORD_OVERHEAD
) -> int | None:
    """The recorded item's size if it is over ``limit``, else None (measured only when a bound
    does not settle it: ``overhead``, from ``record_overhead``)."""
    # At most 4 UTF-8 bytes per character of the three texts: a bound of the item's size.
    characters = (
        len(item[CallItem.TOOL_NAME]) + len(item[CallItem.INPUT]) + len(item[CallItem.OUTPUT])
    )
    if overhead + 4 * characters <= limit:
        return None  # the usual case: no need to measure
    size = sizing.item_size(item_to_wire(item))
    return size if size > limit else None


# ---------------------------------------------------------------------------- its writes


def id_free(now_s: int) -> Condition:
    """No call under the id, or only one whose time is up (TTL has not removed it yet)."""
    return absent(CallItem.PK) | clause("ttl_passed", "{} <= {}", Name(CallItem.TTL), Value(now_s))


def call_live(now_s: int) -> Condition:
    """The call item's time is not up (TTL deletes late)."""
    return clause("call_live", "{} > {}", Name(CallItem.TTL), Value(now_s))


def session_ttl(ttl: int, exact: bool) -> Condition:
    """The session's ttl is the call's (``exact``), or at least it."""
    if exact:
        return clause("ttl_is", "{} = {}", Name(Meta.TTL), Value(ttl))
    return clause("ttl_at_least", "{} >= {}", Name(Meta.TTL), Value(ttl))


@dataclass(frozen=True, slots=True)
class Put:
    """A call write's result: the item under the id (python-typed), ours as put (its ttl as it
    landed) or, ``taken``, the live one that held it; ``learnt``: the session a refusal showed."""

    item: Mapping[str, Any]
    taken: bool = False
    learnt: Session | None = None


@dataclass(frozen=True, slots=True)
class PutToolCall(Plan[Put]):
    """The guarded first write of a call (the module docstring), ``item`` python-typed;
    ``exact_ttl``: its ttl came from the session (compare equal), not ``ttl_seconds`` (at least)."""

    table: str
    session_id: str
    owner: str | None
    item: dict[str, Any]
    exact_ttl: bool
    extend: bool = True  # move the idle deadline on (not when our clock lags the item's)
    learnt: Session | None = None  # the session as the last refusal showed it

    operation: ClassVar[str] = "transact_write_items"

    def request(self, now_ms: int) -> dict[str, Any]:
        now_s = now_ms // 1000
        key = schema.meta_key(self.session_id)
        guard = (
            alive(self.owner, now_s)
            & status_is(Status.ACTIVE)
            & session_ttl(self.item[CallItem.TTL], self.exact_ttl)
        )
        if self.extend:
            moved, not_back = idle_moved(now_s)
            first = {"Update": update_item(self.table, key, moved, guard & not_back, returns=None)}
        else:  # our clock lags: the same guard as a ConditionCheck, billed and refused alike
            first = {"ConditionCheck": check(self.table, key, guard)}
        put = put_item(self.table, item_to_wire(self.item), id_free(now_s))
        return {"TransactItems": [first, {"Put": put}]}

    def succeeded(self, response: dict[str, Any], now_ms: int) -> Put:
        return Put(self.item, learnt=self.learnt)

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Put | Again[Put]:
        assert isinstance(failure, Cancelled)
        meta_old, call_old, now_s = failure.old(0), failure.old(1), now_ms // 1000
        if failure.failed(0):
            # Absent, another owner's (the same answer, on purpose) or expired.
            live(self.session_id, meta_old, self.owner, now_s)
        if failure.failed(1) and call_old is not None:
            # The id is taken (by an earlier attempt of ours whose response was lost, or by
            # another delivery): that item is the answer, even on a session closed since.
            return Put(call_old, taken=True, learnt=self.learnt)
        if failure.failed(0):
            assert meta_old is not None
            current = session_from_item(meta_old)
            if current.status is not Status.ACTIVE:
                raise SessionNotActive(self.session_id, current.status)
            learnt = dataclasses.replace(self, learnt=current)
            ttl = self.item[CallItem.TTL]
            if current.ttl != ttl and (self.exact_ttl or current.ttl < ttl):
                # Another incarnation's, or a ttl beyond the session's: the session's.
                return Again(
                    dataclasses.replace(learnt, item={**self.item, CallItem.TTL: current.ttl})
                )
            if self.extend and idle_ahead(meta_old, now_s):
                # Our clock lags: never move the deadline back.
                return Again(dataclasses.replace(learnt, extend=False))
        raise DynamoDBError("TransactionCanceledException", repr(failure.reasons))


# ---------------------------------------------------------------------------- record_tool_call

MAX_TOOL_NAME = 256  # characters


def fingerprint(tool_name: str, arguments: JSON) -> str:
    """What makes two deliveries "the same call": the tool and its arguments. ``InvalidInput``
    for arguments no record could hold (NaN, ``1e400`` parsed as an infinity, a lone surrogate,
    too deep)."""
    return codec.fingerprint(codec.encode(tool_name, "tool_name"), arguments, what="arguments")


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call's request, validated (``of``): ``input_text`` is the input's exact JSON
    text, ``fingerprint`` the digest of the tool name and the input."""

    session_id: str
    tool_call_id: str
    tool_name: str
    input_text: str
    fingerprint: str
    owner: str | None

    @classmethod
    def of(
        cls, session_id: str, tool_call_id: str, tool_name: str, input: JSON, owner: str | None
    ) -> Call:
        validate_id(tool_call_id, "tool_call_id")
        if not isinstance(tool_name, str) or not tool_name or len(tool_name) > MAX_TOOL_NAME:
            raise InvalidInput(
                f"tool_name must be a non-empty string of at most {MAX_TOOL_NAME} characters"
            )
        input_text = codec.encode(input, "input")
        return cls(
            session_id, tool_call_id, tool_name, input_text, fingerprint(tool_name, input), owner
        )


def record(
    table: Table, call: Call, output: JSON, duration_ms: int, ttl_seconds: int | None
) -> ToolCallRecord:
    """Record ``call`` with its ``output``: one ``PutToolCall`` of the item ``recorded``, with
    the session's ttl (this instance's hint, or one GetItem) unless ``ttl_seconds`` says
    otherwise. A repeat of the request is answered with the stored record, whatever output it
    brings; another request under the id, or a call claimed and not recorded, raises
    ``ToolCallConflict``."""
    validate.duration_ms(duration_ms)
    if ttl_seconds is not None:
        validate.ttl(ttl_seconds)
    output_text = codec.encode(output, "output")
    session_id, owner = call.session_id, call.owner
    now_ms = table.now_ms()
    if ttl_seconds is not None:
        ttl = now_ms // 1000 + ttl_seconds
    else:
        seen = table.memory.hint(session_id, owner, now_ms // 1000)
        ttl = (seen or reads.read(table, session_id, owner)).ttl
    at = format_timestamp(now_ms)
    item = call_item(session_id, call.tool_call_id, call.tool_name, call.fingerprint, at, ttl)
    item |= recorded_fields(call.input_text, output_text, duration_ms, at)
    size = record_size(item, table.item_size_limit)
    if size is not None:
        raise ItemTooLarge(0, size, table.item_size_limit)
    plan = PutToolCall(table.name, session_id, owner, item, exact_ttl=ttl_seconds is None)
    put = table.drive(plan, f"tool record {call.tool_call_id!r} of session {session_id!r}")
    if put.learnt is not None:
        table.memory.remember(put.learnt)
    if not put.taken:
        return record_from_item(put.item)  # what this write stored
    held = put.item
    state, same = state_of(put.item), held[CallItem.FINGERPRINT] == call.fingerprint
    if state is CallState.CLAIMED:  # its holder may be running it
        raise ToolCallConflict(session_id, call.tool_call_id, same_request=same)
    stored = record_from_item(held)
    if not same:
        raise ToolCallConflict(session_id, call.tool_call_id, stored)
    return stored


def read_history(table: Table, session_id: str, owner: str | None) -> list[ToolCallRecord]:
    """The session's live history: a GetItem of the metadata item (a missing, expired or
    foreign session raises), then a Query of the ``tool#`` range only (one Query from the
    metadata item would read every context page too)."""
    reads.read(table, session_id, owner)
    now_s = table.now_ms() // 1000
    items = table.query(schema.pk(session_id), schema.TOOL_PREFIX, schema.TOOLS_END)
    return history(items, now_s)
