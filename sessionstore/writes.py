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
versioned     ring slot ``w<v % 16>``     our lost attempt wrote version ``v``
tool record   the guard ``toolid#<id>``   the call is recorded (ours or a twin's)
============  ==========================  ==============================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import schema
from .attempts import RETRY, Retry
from .clock import format_timestamp
from .errors import (
    ConflictRetriesExhausted,
    DynamoDBError,
    InvalidTransition,
    SessionAlreadyExists,
    SessionExpired,
    SessionNotActive,
    SessionNotFound,
    SessionStoreError,
    Unavailable,
    VersionConflict,
)
from .expressions import Expr, all_of, live_session, status_in
from .models import Session
from .status import Status, sources
from .wire import Cancelled, ConditionFailed, to_python

#: ``judge`` of a versioned write: the current session -> a result (nothing to write), None
#: (write it), or raise.
Judge = Callable[[Session], Session | None]
#: ``change`` of a versioned write: placeholders -> (SET clauses, extra condition).
Change = Callable[[Expr], tuple[str, str]]


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


def ring(item: dict[str, Any]) -> set[str]:
    return {item[slot] for i in range(schema.RING_SIZE) if (slot := f"w{i}") in item}


def _unreachable(what: str, attempts: int) -> SessionStoreError:
    # Plans that never return RETRY from ``refused`` only run out on faults, which the driver
    # reports itself; this stays typed all the same.
    return Unavailable(f"{what}: gave up after {attempts} attempts", maybe_applied=False)


class CreateSession:
    """PutItem if absent. A refusal carrying our ``createToken`` is our own lost attempt."""

    operation = "put_item"

    def __init__(self, table: str, session_id: str, item: dict[str, Any], token: str) -> None:
        self.session_id = session_id
        self.token = token
        e = Expr()
        self._request = {
            "TableName": table,
            "Item": item,
            "ConditionExpression": f"attribute_not_exists({e.n('pk')})",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.params(),
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
        return _unreachable(f"create session {self.session_id!r}", attempts)


class Transition:
    """One UpdateItem whose condition lists the allowed source statuses: no read first."""

    operation = "update_item"

    def __init__(
        self,
        table: str,
        session_id: str,
        to: Status,
        owner: str | None,
        token: str,
        remember: Callable[[Session], None],
    ) -> None:
        self.table = table
        self.session_id = session_id
        self.to = to
        self.owner = owner
        self.token = token
        self.remember = remember
        self.froms = [s.value for s in sources(to)]

    def request(self, now_ms: int) -> dict[str, Any]:
        e = Expr()
        guard = live_session(e, owner=self.owner, now_s=now_ms // 1000)
        if self.froms:
            condition = all_of(guard, status_in(e, self.froms))
        else:  # nothing leads here: let the failure report the current status
            condition = all_of(guard, f"attribute_not_exists({e.n('pk')})")
        return {
            "TableName": self.table,
            "Key": schema.meta_key(self.session_id),
            "UpdateExpression": (
                f"SET {e.n('status')} = {e.v(self.to.value)}, "
                f"{e.n('updatedAt')} = {e.v(format_timestamp(now_ms))}, "
                f"{e.n(tx_attribute(self.to))} = {e.v(self.token)} "
                f"ADD {e.n('version')} {e.v(1)}"
            ),
            "ConditionExpression": condition,
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.params(),
        }

    def succeeded(self, response: dict[str, Any]) -> Session:
        return self._session(to_python(response["Attributes"]) or {})

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Session | Retry:
        assert isinstance(failure, ConditionFailed)
        old = failure.old
        mine = old is not None and old.get(tx_attribute(self.to)) == self.token
        if mine and old is not None and owned(old, self.owner):
            return self._session(old)  # our lost attempt had landed
        current = live(self.session_id, old, self.owner, now_ms // 1000)
        self.remember(current)
        if current.status is self.to:
            return current  # already there: idempotent success, nothing written
        raise InvalidTransition(self.session_id, current.status, self.to)

    def maybe_landed(self) -> None:
        pass

    def exhausted(self, attempts: int) -> SessionStoreError:
        return _unreachable(f"transition of session {self.session_id!r}", attempts)

    def _session(self, item: dict[str, Any]) -> Session:
        session = Session.from_item(item)
        self.remember(session)
        return session


class VersionedWrite:
    """``version = :v`` in the condition, the increment and our token in the same UpdateItem.

    ``change`` gives the SET clause and the extra condition; ``judge`` looks at the current item
    after a refusal and returns it (nothing to do), raises, or returns None (a stale version:
    retry with the version ALL_OLD carries -- one request per retry, never a re-read). Our token
    goes into ring slot ``w<new version % RING_SIZE>``: a refusal that finds it there means our
    lost attempt landed. Once more writes than the ring holds have followed an attempt whose
    response was lost, its outcome can no longer be proven, and the write ends ``Unavailable``
    rather than risk applying twice.
    """

    operation = "update_item"

    def __init__(
        self,
        table: str,
        session_id: str,
        owner: str | None,
        token: str,
        version: int,
        expected: int | None,
        change: Change,
        judge: Judge,
        remember: Callable[[Session], None],
    ) -> None:
        self.table = table
        self.session_id = session_id
        self.owner = owner
        self.token = token
        self.version = version
        self.expected = expected
        self.change = change
        self.judge = judge
        self.remember = remember
        self.uncertain_since: int | None = None  # version of an attempt whose answer was lost
        self.attempted = version  # the version the last attempt expected
        self.current: Session | None = None

    def request(self, now_ms: int) -> dict[str, Any]:
        e = Expr()
        update, extra = self.change(e)
        self.attempted = self.version
        new_version = self.version + 1
        return {
            "TableName": self.table,
            "Key": schema.meta_key(self.session_id),
            "UpdateExpression": (
                f"SET {update}, {e.n('version')} = {e.v(new_version)}, "
                f"{e.n('updatedAt')} = {e.v(format_timestamp(now_ms))}, "
                f"{e.n(schema.ring_slot(new_version))} = {e.v(self.token)}"
            ),
            "ConditionExpression": all_of(
                live_session(e, owner=self.owner, now_s=now_ms // 1000),
                f"{e.n('version')} = {e.v(self.version)}",
                extra,
            ),
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.params(),
        }

    def succeeded(self, response: dict[str, Any]) -> Session:
        return self._session(to_python(response["Attributes"]) or {})

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Session | Retry:
        assert isinstance(failure, ConditionFailed)
        old = failure.old
        if old is not None and owned(old, self.owner) and self.token in ring(old):
            return self._session(old)  # our lost attempt had landed
        current = live(self.session_id, old, self.owner, now_ms // 1000)
        self.remember(current)
        self.current = current
        if (
            self.uncertain_since is not None
            and current.version >= self.uncertain_since + 1 + schema.RING_SIZE
        ):
            raise Unavailable(
                f"session {self.session_id!r}: a write's response was lost and its outcome "
                "can no longer be proven",
                maybe_applied=True,
            )
        self.uncertain_since = None  # the ring still covers it: it did not land
        done = self.judge(current)
        if done is not None:
            return done
        if current.version == self.version:  # only the extra condition failed, unexplained
            raise DynamoDBError("ConditionalCheckFailedException", repr(old))
        if self.expected is not None:
            raise VersionConflict(self.session_id, self.expected, current)
        self.version = current.version
        return RETRY

    def maybe_landed(self) -> None:
        if self.uncertain_since is None:
            self.uncertain_since = self.version

    def exhausted(self, attempts: int) -> SessionStoreError:
        assert self.current is not None  # a conflict was seen, so the item was too
        return ConflictRetriesExhausted(self.session_id, self.attempted, self.current, attempts)

    def _session(self, item: dict[str, Any]) -> Session:
        session = Session.from_item(item)
        self.remember(session)
        return session


@dataclass(frozen=True)
class Recorded:
    """A tool record write's result: ``guard`` is None when this write stored ``record``;
    otherwise the call was recorded before and ``guard`` points at that record."""

    record: dict[str, Any]
    guard: dict[str, Any] | None = None


class RecordToolCall:
    """Guard + record in one transaction, checked against the live, active session.

    1. ConditionCheck on the metadata item: exists, not expired, owner, status ``active`` --
       and, when the record's ttl came from this instance's hint, ``ttl`` equal to it, so a
       stale hint costs a retry instead of a record that expires with another session;
    2. Put of the guard ``toolid#<id>`` unless a live one is there -- the idempotency key.
       An expired guard may be replaced: TTL deletes items one at a time, so the guard can
       outlive its record, and once the record's time is up the id is free again;
    3. Put of the record at ``tool#<recordedAt>#<id>`` -- time order for the history Query.
    """

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
        now_s = now_ms // 1000
        ttl_wire = {"N": str(self.ttl)}
        self.record["ttl"] = ttl_wire
        self.guard["ttl"] = ttl_wire
        e = Expr()
        conditions = [
            live_session(e, owner=self.owner, now_s=now_s),
            f"{e.n('status')} = {e.v(Status.ACTIVE.value)}",
        ]
        if self.check_ttl:
            conditions.append(f"{e.n('ttl')} = {e.v(self.ttl)}")
        g = Expr()
        absent = Expr()
        return {
            "TransactItems": [
                {
                    "ConditionCheck": {
                        "TableName": self.table,
                        "Key": schema.meta_key(self.session_id),
                        "ConditionExpression": all_of(*conditions),
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        **e.params(),
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": self.guard,
                        "ConditionExpression": (
                            f"attribute_not_exists({g.n('pk')}) OR {g.n('ttl')} <= {g.v(now_s)}"
                        ),
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        **g.params(),
                    }
                },
                {
                    "Put": {
                        "TableName": self.table,
                        "Item": self.record,
                        "ConditionExpression": f"attribute_not_exists({absent.n('pk')})",
                        **absent.params(),
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
            if self.check_ttl and current.ttl != self.ttl:
                self.ttl = current.ttl  # the hint was another incarnation's
                return RETRY
        raise DynamoDBError("TransactionCanceledException", str(failure.reasons))

    def maybe_landed(self) -> None:
        pass

    def exhausted(self, attempts: int) -> SessionStoreError:
        return _unreachable(f"tool record of session {self.session_id!r}", attempts)
