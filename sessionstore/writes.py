"""The store's writes as plans for the attempt driver: request builders and outcome interpreters.

Each plan builds the request of its next attempt and explains what came back; none of them
sends, reads or sleeps (``sessionstore.attempts`` does). What a refusal means is decided from
the item as it is (ALL_OLD) and the request token each write leaves behind:

============  ==========================  ==============================================
write         token lands in              a refusal that finds the token means
============  ==========================  ==============================================
create        ``createToken``             our lost attempt created it
transition    ``tx_<status>``             our lost attempt moved it (each status is
                                          entered at most once, so never overwritten)
pinned        ring slot ``w<v % 16>``     our lost attempt wrote version ``v``
commuting     ``tk.<token>``              our lost attempt landed (``SessionWrite``)
tool record   the guard ``toolid#<id>``   the call is recorded (ours or a twin's)
============  ==========================  ==============================================

The writes to the metadata item itself -- transitions and ``SessionWrite`` (pinned or
commuting) with its edits -- are in ``sessionstore.metadata_writes``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import schema
from .attempts import RETRY, Retry
from .errors import (
    DynamoDBError,
    SessionAlreadyExists,
    SessionExpired,
    SessionNotActive,
    SessionNotFound,
    SessionStoreError,
    Unavailable,
)
from .expressions import LIVE_OWNED, LIVE_UNOWNED
from .models import Session
from .status import Status
from .wire import Cancelled, ConditionFailed


def tx_attribute(status: Status) -> str:
    """Where a transition into ``status`` leaves its request token."""
    return f"tx_{status.value}"


def owned(item: dict[str, Any], owner: str | None) -> bool:
    return item.get("owner") == owner


def live(session_id: str, item: dict[str, Any] | None, owner: str | None, now_s: int) -> Session:
    """The item as a Session, or the error that explains why there is none. Another owner's
    session looks exactly like a missing one."""
    if item is None or not owned(item, owner):
        raise SessionNotFound(session_id)
    if int(item["ttl"]) <= now_s:
        raise SessionExpired(session_id, int(item["ttl"]))
    return Session.from_item(item)


def ring_entries(item: dict[str, Any]) -> list[list[str]]:
    """The ring slots' values, split on spaces: the request token first (an append's slot also
    holds its seq and time: ``pages.reservation_entry``)."""
    return [
        str(item[slot]).split(" ")
        for i in range(schema.RING_SIZE)
        if (slot := schema.ring_slot(i)) in item
    ]


def ring(item: dict[str, Any]) -> set[str]:
    """The request tokens in the ring slots."""
    return {entry[0] for entry in ring_entries(item)}


def gave_up(what: str, attempts: int) -> SessionStoreError:
    # Plans whose only RETRY is a corrected ttl (records) or none at all run out on faults and
    # contention, which the driver reports itself; this stays typed all the same.
    return Unavailable(f"{what}: gave up after {attempts} attempts", maybe_applied=False)


class CreateSession:
    """PutItem if absent. A refusal carrying our ``createToken`` is our own lost attempt."""

    __slots__ = ("_request", "session_id", "token")

    operation = "put_item"

    def __init__(self, table: str, session_id: str, item: dict[str, Any], token: str) -> None:
        self.session_id = session_id
        self.token = token
        self._request = {
            "TableName": table,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "ExpressionAttributeNames": {"#pk": "pk"},
        }

    def request(self, now_ms: int) -> dict[str, Any]:
        return self._request

    def succeeded(self, response: dict[str, Any]) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Retry | None:
        assert isinstance(failure, ConditionFailed)
        old = failure.old
        if old is not None and old.get("createToken") == self.token:
            return None
        raise SessionAlreadyExists(self.session_id)

    def maybe_landed(self) -> None:
        pass

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"create session {self.session_id!r}", attempts)


@dataclass(frozen=True)
class Recorded:
    """A tool record write's result: ``guard`` is None when this write stored ``record``;
    otherwise the call was recorded before and ``guard`` points at that record."""

    record: dict[str, Any]
    guard: dict[str, Any] | None = None


class RecordToolCall:
    """Guard + record in one transaction, checked against the live, active session.

    1. ConditionCheck on the metadata item: exists, not expired, owner, status ``active`` --
       and ``ttl`` equal to the record's when that came from the session (a hint or a read can
       be another incarnation's: a mismatch costs a retry, never a record that expires with
       another session), or at least the record's when ``ttl_seconds`` chose it (a record
       never outlives its session: a longer one is cut to the session's, at one retry);
    2. Put of the guard ``toolid#<id>`` unless a live one is there -- the idempotency key.
       An expired guard may be replaced: TTL deletes items one at a time, so the guard can
       outlive its record, and once the record's time is up the id is free again;
    3. Put of the record at ``tool#<recordedAt>#<id>`` -- time order for the history Query.
    """

    __slots__ = ("check_ttl", "guard", "owner", "record", "remember", "session_id", "table", "ttl")

    operation = "transact_write_items"

    def __init__(
        self,
        table: str,
        session_id: str,
        owner: str | None,
        record: dict[str, Any],
        guard: dict[str, Any],
        ttl: int,
        check_ttl: bool,
        remember: Callable[[Session], None],
    ) -> None:
        self.table = table
        self.session_id = session_id
        self.owner = owner
        self.record = record
        self.guard = guard
        self.ttl = ttl
        self.check_ttl = check_ttl
        self.remember = remember

    def request(self, now_ms: int) -> dict[str, Any]:
        # Fixed text, written out rather than built placeholder by placeholder: this runs on
        # every record, and the library's own CPU time per call is budgeted.
        now_s = {"N": str(now_ms // 1000)}
        ttl_wire = {"N": str(self.ttl)}
        self.record["ttl"] = ttl_wire
        self.guard["ttl"] = ttl_wire
        values = {":nows": now_s, ":active": _ACTIVE, ":ttl": ttl_wire}
        if self.owner is None:
            alive = LIVE_UNOWNED
        else:
            alive = LIVE_OWNED
            values[":owner"] = {"S": self.owner}
        comparison = "=" if self.check_ttl else ">="
        return {
            "TransactItems": [
                {
                    "ConditionCheck": {
                        "TableName": self.table,
                        "Key": schema.meta_key(self.session_id),
                        "ConditionExpression": (
                            f"{alive} AND (#status = :active) AND (#ttl {comparison} :ttl)"
                        ),
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        "ExpressionAttributeNames": dict(_CHECK_NAMES),
                        "ExpressionAttributeValues": values,
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": self.guard,
                        "ConditionExpression": "attribute_not_exists(#pk) OR #ttl <= :nows",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        "ExpressionAttributeNames": {"#pk": "pk", "#ttl": "ttl"},
                        "ExpressionAttributeValues": {":nows": now_s},
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": self.record,
                        "ConditionExpression": "attribute_not_exists(#pk)",
                        "ExpressionAttributeNames": {"#pk": "pk"},
                    }
                },
            ]
        }

    def succeeded(self, response: dict[str, Any]) -> Recorded:
        return Recorded(self.record)

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Recorded | Retry:
        assert isinstance(failure, Cancelled)
        now_s = now_ms // 1000
        meta_old, guard_old = failure.old(0), failure.old(1)
        if failure.failed(0):
            # Absent, another owner's or expired: the same errors as every other write.
            live(self.session_id, meta_old, self.owner, now_s)
        if failure.failed(1) and guard_old is not None:
            # Already recorded (by us earlier, or by another instance): the same call returns
            # the original record even if the session has closed since.
            return Recorded(self.record, guard_old)
        if failure.failed(0):
            assert meta_old is not None
            current = Session.from_item(meta_old)
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
                self.record,
                {"recordSk": self.record["sk"]["S"], "fingerprint": self.guard["fingerprint"]["S"]},
            )
        raise DynamoDBError("TransactionCanceledException", str(failure.reasons))

    def maybe_landed(self) -> None:
        pass

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"tool record of session {self.session_id!r}", attempts)


_CHECK_NAMES = {"#pk": "pk", "#ttl": "ttl", "#owner": "owner", "#status": "status"}
_ACTIVE = {"S": Status.ACTIVE.value}
