"""Idempotent tool calls: one item per call, put once, completed in place.

A tool call is one item at ``tool#<id>`` in its session's partition. The id is the
idempotency key, stable across retries, instances and time. The item is ``claimed`` (written
*before* the tool runs by ``sessionstore.mcp.claims``, with a claim token and a lease) or
``recorded`` (name, input, output, duration, the time it was recorded): ``CallState``.

Every first write of a call is one ``PutToolCall``: a ``TransactWriteItems`` of

1. an Update of the metadata item, whose condition says the session exists, is not expired
   (cap and idle deadline), is the caller's and ``active``, and has the ``ttl`` the call
   carries (equal when it came from the session: a re-created session costs a retry, never a
   call that expires with another incarnation; at least, when ``ttl_seconds`` chose it). Its
   only change is ``SET idleUntil``: a call keeps an idle session alive. An Update rather than
   a ConditionCheck for that: same request, same write units, same ALL_OLD on a refusal;
2. a Put of the call item unless a live one is there. An expired one may be replaced: TTL
   deletes late, and once a call's time is up its id is free again.

Both actions return ``ALL_OLD`` when refused, so one refused request says why -- and a repeat
is answered from the item it returns, with no read. ``CompleteToolCall`` writes a claim's result
into its item; ``PutRecord`` is the single PutItem of a harmless call: no claim, no transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from . import codec, schema, sizing
from .attempts import RETRY, Retry, gave_up
from .clock import format_timestamp
from .errors import DynamoDBError, ItemTooLarge, SessionExpired, SessionNotActive, SessionStoreError
from .expressions import Expr, all_of, extend_idle, idle_ahead, live_session
from .ids import MAX_ID_LENGTH
from .item import WIDEST_TTL, live, session_from_item
from .lifecycle import Status
from .models import Session, ToolCallRecord
from .wire import Cancelled, ConditionFailed, item_to_wire


class CallState(Enum):
    """Where a call item stands."""

    CLAIMED = "claimed"  # written before the tool ran; no result yet
    RECORDED = "recorded"  # the result is in the item


def call_item(
    session_id: str, tool_call_id: str, tool_name: str, fingerprint: str, called_at: str, ttl: int
) -> dict[str, Any]:
    """What every call item holds (python-typed); a state and its fields are added to it.

    ``fingerprint`` is a digest of the *request* (tool name + input): a repeat with the same
    request gets the stored answer, another request under the same id is a conflict."""
    return {
        "pk": schema.pk(session_id),
        "sk": schema.tool_sk(tool_call_id),
        "sessionId": session_id,
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "fingerprint": fingerprint,
        "calledAt": called_at,
        "ttl": ttl,
    }


def recorded_fields(
    input_text: str, output_text: str, duration_ms: int, recorded_at: str
) -> dict[str, Any]:
    """The fields a recorded call adds to its item (python-typed)."""
    return {
        "state": CallState.RECORDED.value,
        "input": input_text,
        "output": output_text,
        "durationMs": duration_ms,
        "recordedAt": recorded_at,
    }


def state_of(item: Mapping[str, Any]) -> CallState:
    # The previous release's records (``tool#<recordedAt>#<id>``, no ``state``) sit in the same
    # range until they expire with their session: they are records, and read as such.
    return CallState(item.get("state", CallState.RECORDED.value))


def record_from_item(item: Mapping[str, Any]) -> ToolCallRecord:
    """A recorded call item (python-typed) as a ``ToolCallRecord``."""
    return ToolCallRecord(
        session_id=item["sessionId"],
        tool_call_id=item["toolCallId"],
        tool_name=item["toolName"],
        input=codec.decode(item["input"]),
        output=codec.decode(item["output"]),
        duration_ms=int(item["durationMs"]),
        recorded_at=item["recordedAt"],
        ttl=int(item["ttl"]),
    )


def history(items: Iterable[Mapping[str, Any]], now_s: int) -> list[ToolCallRecord]:
    """The recorded calls among ``items`` whose ttl has not passed, in order of recording (a
    claim that never completed is not history).

    Expired ones are left out: DynamoDB deletes them late and one at a time, so what a reader
    sees must not depend on when its sweeper ran."""
    recorded = [
        item for item in items if int(item["ttl"]) > now_s and state_of(item) is CallState.RECORDED
    ]
    recorded.sort(key=lambda item: (item["recordedAt"], item["toolCallId"]))
    return [record_from_item(item) for item in recorded]


#: The most bytes a recorded item holds besides its tool name, input and output texts (a claim
#: token and lease, kept by a completed claim, included).
#: What a claimed call's item may hold besides the record when its result is written, at their
#: widest: the claim's token and lease (an engine may size the item before the lease is removed)
#: and a multi-round-trip call's round (``StartRound``).
CLAIM_FIELDS: dict[str, Any] = {
    "claimToken": "x" * MAX_ID_LENGTH,
    "leaseUntil": int("9" * 38),
    "round": int("9" * 38),
    "roundToken": "x" * MAX_ID_LENGTH,
}
_RECORD_OVERHEAD = sizing.item_size(
    item_to_wire(
        {
            **call_item(
                "x" * MAX_ID_LENGTH,
                "x" * MAX_ID_LENGTH,
                "",
                "x" * 64,  # a sha256 in hex
                format_timestamp(0),  # always 24 characters
                WIDEST_TTL,
            ),
            **recorded_fields("", "", int("9" * 38), format_timestamp(0)),
            **CLAIM_FIELDS,
        }
    )
)


def record_size(item: Mapping[str, Any], limit: int) -> int | None:
    """The recorded item's size if it is over ``limit``, else None (measured only when a bound
    does not settle it)."""
    # At most 4 UTF-8 bytes per character of the three texts: a bound of the item's size.
    characters = len(item["toolName"]) + len(item["input"]) + len(item["output"])
    if _RECORD_OVERHEAD + 4 * characters <= limit:
        return None  # the usual case: no need to measure
    size = sizing.item_size(item_to_wire(dict(item)))
    return size if size > limit else None


def fits(item: Mapping[str, Any], limit: int) -> bool:
    return record_size(item, limit) is None


def check_record_size(item: Mapping[str, Any], limit: int) -> None:
    """Refuse a recorded item over the item size limit before anything is sent."""
    size = record_size(item, limit)
    if size is not None:
        raise ItemTooLarge(0, size, limit)


@dataclass(frozen=True, slots=True)
class Put:
    """A call write's result: ``existing`` is None when this write put the item; otherwise the
    id was taken, and ``existing`` (python-typed) is the live item that holds it."""

    existing: Mapping[str, Any] | None = None


def _put_call(table: str, item: dict[str, Any], now_s: int) -> dict[str, Any]:
    # No call under this id, or only one whose time is up (TTL has not removed it yet).
    e = Expr()
    return {
        "TableName": table,
        "Item": item_to_wire(item),
        "ConditionExpression": (
            f"attribute_not_exists({e.n('pk')}) OR {e.n('ttl')} <= {e.v(now_s)}"
        ),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        **e.params(),
    }


@dataclass(slots=True)
class PutToolCall:
    """The guarded first write of a call (the module docstring): ``item`` python-typed, claimed
    or recorded; ``exact_ttl``: the item's ttl came from the session (compare equal), not from
    ``ttl_seconds`` (compare at least)."""

    table: str
    session_id: str
    owner: str | None
    item: dict[str, Any]
    exact_ttl: bool
    remember: Callable[[Session], None]
    extend: bool = True  # move the idle deadline on (not when our clock lags the item's)

    operation = "transact_write_items"

    def request(self, now_ms: int) -> dict[str, Any]:
        now_s = now_ms // 1000
        session = Expr()
        sets, not_back = extend_idle(session, now_s) if self.extend else ("", "")
        # Live, the caller's, active, and the incarnation the call's ttl belongs to.
        comparison = "=" if self.exact_ttl else ">="
        condition = all_of(
            live_session(session, owner=self.owner, now_s=now_s),
            f"{session.n('status')} = {session.v(Status.ACTIVE.value)}",
            f"{session.n('ttl')} {comparison} {session.v(self.item['ttl'])}",
            not_back,
        )
        guard: dict[str, Any] = {
            "TableName": self.table,
            "Key": schema.meta_key(self.session_id),
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **session.params(),
        }
        # Without a deadline to move (our clock lags), the same guard as a ConditionCheck:
        # billed alike, and refused alike with the item.
        first = (
            {"Update": {**guard, "UpdateExpression": "SET " + sets}}
            if sets
            else {"ConditionCheck": guard}
        )
        return {"TransactItems": [first, {"Put": _put_call(self.table, self.item, now_s)}]}

    def succeeded(self, response: dict[str, Any]) -> Put:
        return Put()

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Put | Retry:
        assert isinstance(failure, Cancelled)
        meta_old, call_old = failure.old(0), failure.old(1)
        if failure.failed(0):
            # Absent, another owner's (the same answer, on purpose) or expired.
            live(self.session_id, meta_old, self.owner, now_ms // 1000)
        if failure.failed(1) and call_old is not None:
            # The id is taken (by an earlier attempt of ours whose response was lost, or by
            # another delivery): that item is the answer, even on a session closed since.
            return Put(call_old)
        if failure.failed(0):
            assert meta_old is not None
            current = session_from_item(meta_old)
            self.remember(current)
            if current.status is not Status.ACTIVE:
                raise SessionNotActive(self.session_id, current.status)
            ttl = self.item["ttl"]
            if current.ttl != ttl and (self.exact_ttl or current.ttl < ttl):
                self.item["ttl"] = current.ttl  # another incarnation's, or beyond the session
                return RETRY
            if self.extend and idle_ahead(meta_old, now_ms // 1000):
                self.extend = False  # our clock lags: never move the deadline back
                return RETRY
        raise DynamoDBError("TransactionCanceledException", repr(failure.reasons))

    def maybe_landed(self) -> None:
        pass  # a refusal shows the item as it is: the claim token or the fingerprint settles it

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"tool call {self.item['toolCallId']!r}", attempts)


@dataclass(slots=True)
class PutRecord:
    """A harmless call's record: one PutItem, the id free or expired. The session was read
    just before (the caller's, live, active); no transaction re-checks it, since running the
    tool again would change nothing."""

    table: str
    item: dict[str, Any]

    operation = "put_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        return _put_call(self.table, self.item, now_ms // 1000)

    def succeeded(self, response: dict[str, Any]) -> Put:
        return Put()

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Put | Retry:
        assert isinstance(failure, ConditionFailed)
        if failure.old is None:
            return RETRY  # gone between the check and now: the id is free again
        return Put(failure.old)

    def maybe_landed(self) -> None:
        pass

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"tool record {self.item['toolCallId']!r}", attempts)


def _call_key(session_id: str, tool_call_id: str) -> dict[str, Any]:
    return {"pk": {"S": schema.pk(session_id)}, "sk": {"S": schema.tool_sk(tool_call_id)}}


def _still_claimed(e: Expr, token: str) -> str:
    """The call is claimed, by the claim named ``token``, and not completed yet."""
    return f"{e.n('claimToken')} = {e.v(token)} AND {e.n('state')} = {e.v(CallState.CLAIMED.value)}"


@dataclass(slots=True)
class CompleteToolCall:
    """Write the result into a claimed call: one UpdateItem, on the claim still being ours.

    ``fields`` (python-typed) are ``recorded_fields``; ``token`` is the claim's. The token
    stays in the item, so a retry whose first response was lost finds its own result there."""

    table: str
    session_id: str
    tool_call_id: str
    token: str
    ttl: int  # the claim's
    fields: dict[str, Any]

    operation = "update_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        e = Expr()
        sets = ", ".join(f"{e.n(name)} = {e.v(value)}" for name, value in self.fields.items())
        return {
            "TableName": self.table,
            "Key": _call_key(self.session_id, self.tool_call_id),
            "UpdateExpression": f"SET {sets} REMOVE {e.n('leaseUntil')}",
            # Still our claim, and not completed yet.
            "ConditionExpression": _still_claimed(e, self.token),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.params(),
        }

    def succeeded(self, response: dict[str, Any]) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> None:
        assert isinstance(failure, ConditionFailed)
        old = failure.old or {}
        if old.get("claimToken") == self.token and state_of(old) is CallState.RECORDED:
            return None  # our own completion landed; its response was lost
        # TTL removed the claim (the session's time ran out while the tool ran), or the id was
        # taken again, which only an expired item allows: claims carry the session's exact ttl,
        # so this incarnation of the session is over.
        raise SessionExpired(self.session_id, self.ttl)

    def maybe_landed(self) -> None:
        pass

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"completion of tool call {self.tool_call_id!r}", attempts)


@dataclass(slots=True)
class StartRound:
    """Start round ``round`` (2, 3, ...) of a multi-round-trip call this claim holds: one
    UpdateItem on the call item, taken at most once per round whatever is re-sent.

    The sealed ``requestState`` a client sends back proves the round was issued, not that it
    has not run: a re-sent last round would run the tool's final step again. So the round is
    claimed like the call was -- ``round`` moves from ``round - 1`` (absent before round 2) to
    ``round`` only while the call is still claimed by ``token`` -- and the delivery's own
    ``delivery`` token, kept beside it, tells its lost response apart from a rival delivery.
    The lease is renewed, so a rival is told "in progress" while this round runs. A refusal
    returns the item as it is (``Put.existing``; None when it is gone)."""

    table: str
    session_id: str
    tool_call_id: str
    token: str  # the claim's
    round: int
    delivery: str
    lease_ms: int

    operation = "update_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        e = Expr()
        previous = (
            f"attribute_not_exists({e.n('round')})"
            if self.round == 2
            else f"{e.n('round')} = {e.v(self.round - 1)}"
        )
        return {
            "TableName": self.table,
            "Key": _call_key(self.session_id, self.tool_call_id),
            # The previous round's suspension is no longer an answer: the client has moved on.
            "UpdateExpression": (
                f"SET {e.n('round')} = {e.v(self.round)}, {e.n('roundToken')} = "
                f"{e.v(self.delivery)}, {e.n('leaseUntil')} = {e.v(now_ms + self.lease_ms)} "
                f"REMOVE {e.n(SUSPENDED)}, {e.n(SUSPENDED_ROUND)}"
            ),
            "ConditionExpression": all_of(
                _still_claimed(e, self.token),
                f"{e.n('ttl')} > {e.v(now_ms // 1000)}",  # TTL deletes late
                previous,
            ),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.params(),
        }

    def succeeded(self, response: dict[str, Any]) -> Put:
        return Put()

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Put:
        assert isinstance(failure, ConditionFailed)
        if failure.old is not None and failure.old.get("roundToken") == self.delivery:
            return Put()  # our own start landed; its response was lost
        return Put(failure.old or {})

    def maybe_landed(self) -> None:
        pass  # the delivery token settles it

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"round {self.round} of tool call {self.tool_call_id!r}", attempts)


#: A suspended round's answer, kept in the call item for a re-sent round (``SuspendRound``).
SUSPENDED = "suspended"
SUSPENDED_ROUND = "suspendedRound"
#: A suspension larger than this is not kept: a re-sent round is then told "in progress".
MAX_SUSPENDED_BYTES = 64 * 1024


@dataclass(slots=True)
class SuspendRound:
    """Keep the answer of round ``round`` -- it asked the client for input -- in the call item:
    one UpdateItem, on the round still being ours. Its response is the only way to the next
    round, so a client whose copy was lost and sends the round again is answered with it
    (sealed afresh by the SDK) instead of waiting out a call that can no longer finish. The
    next round removes it (``StartRound``). A refusal (the item gone, the round taken since)
    leaves nothing to keep."""

    table: str
    session_id: str
    tool_call_id: str
    token: str  # the claim's
    round: int
    answer: str  # the ``InputRequiredResult`` as JSON text

    operation = "update_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        e = Expr()
        this_round = (
            f"attribute_not_exists({e.n('round')})"
            if self.round == 1
            else f"{e.n('round')} = {e.v(self.round)}"
        )
        return {
            "TableName": self.table,
            "Key": _call_key(self.session_id, self.tool_call_id),
            "UpdateExpression": (
                f"SET {e.n(SUSPENDED)} = {e.v(self.answer)}, "
                f"{e.n(SUSPENDED_ROUND)} = {e.v(self.round)}"
            ),
            "ConditionExpression": all_of(
                _still_claimed(e, self.token),
                this_round,
            ),
            **e.params(),
        }

    def succeeded(self, response: dict[str, Any]) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> None:
        return None  # the round is no longer ours to answer for: nothing to keep

    def maybe_landed(self) -> None:
        pass  # writing the same answer again is harmless

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"suspension of tool call {self.tool_call_id!r}", attempts)


def suspended_answer(item: Mapping[str, Any], round_number: int) -> str | None:
    """The answer round ``round_number`` left in the call item (python-typed), if it did."""
    if state_of(item) is not CallState.CLAIMED or SUSPENDED not in item:
        return None
    return str(item[SUSPENDED]) if int(item.get(SUSPENDED_ROUND, 0)) == round_number else None
