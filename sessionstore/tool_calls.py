"""Idempotent tool-call records: a call recorded exactly once, however often it is retried.

One ``TransactWriteItems`` (``RecordToolCall``) per call, all or nothing:

1. Update of the metadata item: exists, not expired (cap and idle deadline), the caller's,
   ``active`` -- and
   its ``ttl`` equal to the record's when that came from the session (a hint or a read can be
   another incarnation's: a mismatch costs a retry, never a record that expires with another
   session), or at least the record's when ``ttl_seconds`` chose it (a record never outlives
   its session: a longer one is cut to the session's, at one retry). Its only change is
   ``SET idleUntil = idle + :now``: recording a call keeps an idle session alive. It used to
   be a ConditionCheck; a transactional Update bills the same (one request, 2 write units per
   started KB of the metadata item) and its refusal returns ALL_OLD the same way. It bumps no
   version and names no token: the transaction's own guard makes it exactly-once;
2. Put of the guard ``toolid#<id>`` unless a live one is there: the idempotency key, stable
   across retries, instances and time. An expired guard may be replaced: TTL deletes items one
   at a time, so the guard can outlive its record, and once the record's time is up the id is
   free again. The guard keeps the record's key and a digest of the *request* (tool name +
   input): a repeat with the same request returns the stored record, a different request under
   the same id is ``ToolCallConflict``;
3. Put of the record at ``tool#<recordedAt>#<id>``: time order for the history Query.

A repeat of a recorded call is refused by the guard, whose ALL_OLD points at the record: one
GetItem reads it back. The records never change and TTL removes them with the session.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import codec, schema, sizing
from .attempts import RETRY, Retry, gave_up
from .clock import format_timestamp
from .errors import DynamoDBError, SessionNotActive, SessionStoreError
from .expressions import Expr, all_of, extend_idle, live_session
from .ids import MAX_ID_LENGTH
from .item import WIDEST_TTL, live, session_from_item
from .lifecycle import Status
from .models import ToolCallRecord
from .wire import Cancelled, ConditionFailed, item_to_wire

if TYPE_CHECKING:
    from .models import Session


def record_from_item(item: Mapping[str, Any]) -> ToolCallRecord:
    """A record item (python-typed) as a ``ToolCallRecord``."""
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


def record_item(
    session_id: str,
    tool_call_id: str,
    tool_name: str,
    input_text: str,
    output_text: str,
    duration_ms: int,
    recorded_at: str,
    ttl: int,
) -> dict[str, Any]:
    """The record item (python-typed)."""
    return {
        "pk": schema.pk(session_id),
        "sk": schema.tool_sk(recorded_at, tool_call_id),
        "sessionId": session_id,
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "input": input_text,
        "output": output_text,
        "durationMs": duration_ms,
        "recordedAt": recorded_at,
        "ttl": ttl,
    }


def guard_item(
    session_id: str, tool_call_id: str, record_sk: str, fingerprint: str
) -> dict[str, Any]:
    """The guard item (python-typed); its ttl is the record's, set by ``RecordToolCall``."""
    return {
        "pk": schema.pk(session_id),
        "sk": schema.guard_sk(tool_call_id),
        "toolCallId": tool_call_id,
        "recordSk": record_sk,
        "fingerprint": fingerprint,
    }


#: The most bytes a record holds besides its tool name, input and output texts.
_RECORD_OVERHEAD = sizing.item_size(
    item_to_wire(
        record_item(
            "x" * MAX_ID_LENGTH,
            "x" * MAX_ID_LENGTH,
            "",
            "",
            "",
            int("9" * 38),  # a number has at most 38 significant digits
            format_timestamp(0),  # always 24 characters
            WIDEST_TTL,
        )
    )
)


def record_size_bound(tool_name: str, input_text: str, output_text: str) -> int:
    """At most 4 UTF-8 bytes per character of the three texts: a bound of the record's size."""
    return _RECORD_OVERHEAD + 4 * (len(tool_name) + len(input_text) + len(output_text))


def live_records(items: Iterable[Mapping[str, Any]], now_s: int) -> Iterator[ToolCallRecord]:
    """The records among ``items`` whose ttl has not passed: DynamoDB deletes them late and one
    at a time, so what a reader sees must not depend on when its sweeper ran."""
    for item in items:
        if int(item["ttl"]) > now_s:
            yield record_from_item(item)


@dataclass(frozen=True, slots=True)
class Recorded:
    """A record write's result: ``guard`` is None when this write stored the record; otherwise
    the call was recorded before and ``guard`` (python-typed) points at that record."""

    guard: Mapping[str, Any] | None = None


@dataclass(slots=True)
class RecordToolCall:
    """Guard + record in one transaction, checked against the live, active session (the module
    docstring). ``record`` and ``guard`` are python-typed; ``check_ttl``: the record's ttl came
    from the session (compare equal), not from ``ttl_seconds`` (compare at least)."""

    table: str
    session_id: str
    owner: str | None
    record: dict[str, Any]
    guard: dict[str, Any]
    ttl: int
    check_ttl: bool
    remember: Callable[[Session], None]

    operation = "transact_write_items"

    def request(self, now_ms: int) -> dict[str, Any]:
        now_s = now_ms // 1000
        self.record["ttl"] = self.guard["ttl"] = self.ttl
        check = Expr()
        ttl = check.n("ttl")
        comparison = "=" if self.check_ttl else ">="
        check_condition = all_of(
            live_session(check, owner=self.owner, now_s=now_s),
            f"{check.n('status')} = {check.v(Status.ACTIVE.value)}",
            f"{ttl} {comparison} {check.v(self.ttl)}",
        )
        guard = Expr()
        guard_condition = (
            f"attribute_not_exists({guard.n('pk')}) OR {guard.n('ttl')} <= {guard.v(now_s)}"
        )
        record = Expr()
        return {
            "TransactItems": [
                {
                    # An Update, not a ConditionCheck, to move the idle deadline on: same
                    # request, same write units (each bills as a transactional write of the
                    # metadata item), same ALL_OLD on a refusal.
                    "Update": {
                        "TableName": self.table,
                        "Key": schema.meta_key(self.session_id),
                        "UpdateExpression": "SET " + extend_idle(check, now_s),
                        "ConditionExpression": check_condition,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        **check.params(),
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": item_to_wire(self.guard),
                        "ConditionExpression": guard_condition,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        **guard.params(),
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": item_to_wire(self.record),
                        "ConditionExpression": f"attribute_not_exists({record.n('pk')})",
                        **record.params(),
                    }
                },
            ]
        }

    def succeeded(self, response: dict[str, Any]) -> Recorded:
        return Recorded()

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Recorded | Retry:
        assert isinstance(failure, Cancelled)
        meta_old, guard_old = failure.old(0), failure.old(1)
        if failure.failed(0):
            # Absent, another owner's or expired: the same errors as every other write.
            live(self.session_id, meta_old, self.owner, now_ms // 1000)
        if failure.failed(1) and guard_old is not None:
            # Already recorded (by us earlier, or by another instance): the same call returns
            # the original record even if the session has closed since.
            return Recorded(guard_old)
        if failure.failed(0):
            assert meta_old is not None
            current = session_from_item(meta_old)
            self.remember(current)
            if current.status is not Status.ACTIVE:
                raise SessionNotActive(self.session_id, current.status)
            if current.ttl != self.ttl and (self.check_ttl or current.ttl < self.ttl):
                self.ttl = current.ttl  # another incarnation's, or longer than the session
                return RETRY
        if failure.failed(2):
            # Our record's own key is taken: an earlier attempt of ours landed (its guard has
            # expired since, so only the record said so). Read it back like a recorded call.
            return Recorded(
                {"recordSk": self.record["sk"], "fingerprint": self.guard["fingerprint"]}
            )
        raise DynamoDBError("TransactionCanceledException", str(failure.reasons))

    def maybe_landed(self) -> None:
        pass

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"tool record of session {self.session_id!r}", attempts)
