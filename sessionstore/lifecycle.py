"""The session lifecycle: the one table of allowed moves, the guarded move, and the create.

Layer: a pattern module, over ``locking`` (a move is a write of the metadata item).

A session is created ``initializing`` and moves ``active`` -> ``closing`` -> ``closed`` (or
``initializing`` -> ``closing``); ``TRANSITIONS`` is the only source of truth. A move is one
UpdateItem whose condition lists the statuses it may come from (``status_in``), so no read is
needed and no read-then-write race exists: two instances closing one session cannot both move
it. A refused move is explained from the item the refusal returns (ALL_OLD): asking for the
status the session already has is a no-op success, anything else not in the table is
``InvalidTransition``. A session that is done with can also be closed and let go
(``close_and_expire``): closed and its ttl brought forward, with its attributes item's, in one
transaction.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from . import locking, reads, schema, write_tokens
from .clock import format_timestamp
from .conditions import (
    TRUE,
    Clause,
    Condition,
    Name,
    Update,
    Value,
    absent,
    assign,
    clause,
    item_to_wire,
    put_item,
    set_,
    update_item,
)
from .errors import DynamoDBError, InvalidInput, InvalidTransition, SessionAlreadyExists
from .item import (
    EMPTY_MAP_BYTES,
    AttributesItem,
    Meta,
    alive,
    attributes_item,
    idle_ahead,
    idle_moved,
    live,
    new_item,
    session_from_item,
    stored,
)
from .locking import MetadataWrite
from .models import Session, Status
from .table import Again, Plan, Table
from .wire import Cancelled, ConditionFailed, to_python

__all__ = [
    "TRANSITIONS",
    "StatusEdit",
    "close_and_expire",
    "create",
    "sources",
    "status_in",
    "status_is",
    "touch",
    "transition",
    "update_status",
]

#: The only source of truth for the state machine.
TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.INITIALIZING: frozenset({Status.ACTIVE, Status.CLOSING}),
    Status.ACTIVE: frozenset({Status.CLOSING}),
    Status.CLOSING: frozenset({Status.CLOSED}),
    Status.CLOSED: frozenset(),
}


def sources(target: Status) -> list[Status]:
    """Statuses from which ``target`` may be entered, in declaration order."""
    return [s for s in Status if target in TRANSITIONS[s]]


def status_in(*statuses: Status) -> Condition:
    """The session's status is one of ``statuses`` (none: refused, and the refusal reports the
    current status)."""
    if not statuses:
        return absent(Meta.PK)
    marks = ", ".join("{}" for _ in statuses)
    return clause(
        "status_in", f"{{}} IN ({marks})", Name(Meta.STATUS), *(Value(s.value) for s in statuses)
    )


def status_is(status: Status) -> Condition:
    return clause("status_is", "{} = {}", Name(Meta.STATUS), Value(status.value))


@dataclass(frozen=True, slots=True)
class StatusEdit:
    """Move the session to ``to`` (an ``Edit`` for ``locking.write``): the condition lists the
    allowed source statuses. ``transition`` sends it last writer wins (the condition is the
    guard); ``update_status`` pins it to the version it read."""

    session_id: str
    to: Status
    ttl: int | None = None  # a new ttl (epoch seconds), set by the same write

    def update(self) -> Update:
        update = assign(Meta.STATUS, self.to.value)
        return update if self.ttl is None else update + assign(Meta.TTL, self.ttl)

    def condition(self) -> Condition:
        return status_in(*sources(self.to))

    def token_value(self, now_s: int) -> Clause:
        return write_tokens.stamp(now_s)

    def judge(self, current: Session) -> Session | None:
        if current.status is self.to:
            return current  # already there: nothing to write
        if self.to not in TRANSITIONS[current.status]:
            raise InvalidTransition(self.session_id, current.status, self.to)
        return None


def _status(value: object, name: str) -> Status:
    if not isinstance(value, Status):
        raise InvalidInput(f"{name} must be a Status, not {value!r}")
    return value


def transition(table: Table, session_id: str, to: Status, owner: str | None) -> Session:
    """Move to ``to`` if the table allows it: one UpdateItem, last writer wins."""
    edit = StatusEdit(session_id, _status(to, "to"))
    session = locking.write(table, session_id, owner, edit).session
    return reads.landed(table, session, f"write to session {session_id!r}")


def update_status(table: Table, session_id: str, status: Status, owner: str | None) -> Session:
    """The source design's optimistic read-modify-write, done right: one request pinned to the
    version of this instance's last copy (a cold instance reads it first), retried on the
    version ALL_OLD shows. An illegal move is refused on the copy and again by the condition."""
    edit = StatusEdit(session_id, _status(status, "status"))
    seen = table.memory.hint(session_id, owner, table.now_ms() // 1000)
    if seen is None:
        seen = reads.read(table, session_id, owner)
        done = edit.judge(seen)
        if done is not None:
            return reads.attach(table, done)
    with reads.on_conflict(table):
        wrote = locking.write(table, session_id, owner, edit, version=seen.version)
    return reads.landed(table, wrote.session, f"write to session {session_id!r}")


@dataclass(frozen=True, slots=True)
class CloseAndExpire(Plan[None]):
    """The metadata write of a close that sets the ttl too (``meta``, carrying a
    ``StatusEdit``) and the same ttl on the attributes item, in one transaction; once closed,
    the session's attributes can no longer change, so nothing moves their ttl back. The attributes
    update has no condition: a session that never had any gets an empty item (an earlier
    incarnation's, to every reader) that goes with it. A transaction returns nothing."""

    meta: MetadataWrite
    expire_at: int

    operation: ClassVar[str] = "transact_write_items"

    def request(self, now_ms: int) -> dict[str, Any]:
        table, session_id = self.meta.table, self.meta.session_id
        attrs = assign(AttributesItem.TTL, self.expire_at)
        # An item this creates is complete, and no session's (``attributes``' reader skips it).
        for field, value in (
            (AttributesItem.REV, 0),
            (AttributesItem.BYTES, EMPTY_MAP_BYTES),
            (AttributesItem.INCARNATION, ""),
        ):
            attrs += set_(
                field, "{} = if_not_exists({}, {})", Name(field), Name(field), Value(value)
            )
        theirs = update_item(table, schema.attrs_key(session_id), attrs, TRUE, returns=None)
        theirs.pop("ReturnValuesOnConditionCheckFailure")  # no condition
        return {"TransactItems": [self.meta.transaction_action(now_ms), {"Update": theirs}]}

    def succeeded(self, response: dict[str, Any], now_ms: int) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Again[None] | None:
        assert isinstance(failure, Cancelled)
        if not failure.failed(0):  # the attributes update has no condition
            raise DynamoDBError("TransactionCanceledException", repr(failure.reasons))
        # Ours already landed, already closed (left as it is), or the typed error.
        verdict = self.meta.refused_first(failure, now_ms)
        if isinstance(verdict, MetadataWrite):
            return Again(dataclasses.replace(self, meta=verdict))
        return None


def close_and_expire(table: Table, session_id: str, owner: str | None, expire_at: int) -> None:
    """``closing`` -> ``closed``, and ``ttl = expire_at`` on the metadata and attributes items:
    one transaction (``CloseAndExpire``)."""
    edit = StatusEdit(session_id, Status.CLOSED, expire_at)
    token = table.token()
    meta = locking.planned(table, session_id, owner, edit, token)
    try:
        with table.memory.refusals():
            table.drive(CloseAndExpire(meta, expire_at), f"close of session {session_id!r}")
    finally:
        table.memory.settle(session_id, token, ())


@dataclass(frozen=True, slots=True)
class CreateSession(Plan[None]):
    """PutItem of a new session's metadata item (``item.new_item``, wire form) if the id is
    free -- in one transaction with its attributes item when it has attributes. A refusal whose
    item names our token is our own lost attempt."""

    table: str
    session_id: str
    item: dict[str, Any]
    token: str
    attributes: dict[str, Any] | None = None  # wire form

    # A property where other plans have a class constant: the attributes decide the operation.
    @property
    def operation(self) -> str:  # type: ignore[override]
        return "put_item" if self.attributes is None else "transact_write_items"

    def request(self, now_ms: int) -> dict[str, Any]:
        put = put_item(self.table, self.item, absent(Meta.PK))
        if self.attributes is None:
            return put
        # Unconditional: an earlier session's attributes item (TTL deletes late) is replaced.
        return {"TransactItems": [{"Put": put}, {"Put": put_item(self.table, self.attributes)}]}

    def succeeded(self, response: dict[str, Any], now_ms: int) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> None:
        old = failure.old if isinstance(failure, ConditionFailed) else failure.old(0)
        if old is not None and write_tokens.carries(old, self.token):
            return None
        raise SessionAlreadyExists(self.session_id)


def create(
    table: Table,
    session_id: str,
    owner: str | None,
    ttl_seconds: int,
    idle_seconds: int | None,
    attrs: dict[str, str],
) -> Session:
    """Put a new session (``attrs``: its first attributes' JSON texts, validated)."""
    token = table.token()
    now_ms = table.now_ms()
    ttl = now_ms // 1000 + ttl_seconds
    # A fixed-ttl session is idle for its whole ttl: one formula (``item.idle_moved``).
    idle = ttl_seconds if idle_seconds is None else idle_seconds
    item = new_item(
        session_id,
        owner,
        format_timestamp(now_ms),
        ttl,
        token,
        now_ms // 1000,
        1 if attrs else 0,
        idle,
        min(now_ms // 1000 + idle, ttl),
    )
    extra = attributes_item(session_id, token, 1, attrs, ttl) if attrs else None
    plan = CreateSession(
        table.name,
        session_id,
        item_to_wire(item),
        token,
        None if extra is None else item_to_wire(extra),
    )
    try:
        table.drive(plan, f"create session {session_id!r}")
    finally:
        table.memory.settle(session_id, token, ())
    session = table.memory.remember(session_from_item(item))
    if extra is None:
        return session
    table.memory.keep_attributes(session_id, stored(extra))
    return reads.attach(table, session)


# ---------------------------------------------------------------------------- idle expiry


@dataclass(frozen=True, slots=True)
class Touch(Plan[Session]):
    """Move an idle session's deadline on and change nothing else -- no version bump, no
    request token: re-sending it (a lost response) only moves the deadline again, to the same
    place or later, which is what was asked."""

    table: str
    session_id: str
    owner: str | None

    operation: ClassVar[str] = "update_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        moved, not_back = idle_moved(now_ms // 1000)
        condition = alive(self.owner, now_ms // 1000) & not_back
        return update_item(self.table, schema.meta_key(self.session_id), moved, condition)

    def succeeded(self, response: dict[str, Any], now_ms: int) -> Session:
        return session_from_item(to_python(response["Attributes"]) or {})

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Session:
        assert isinstance(failure, ConditionFailed)
        session = live(self.session_id, failure.old, self.owner, now_ms // 1000)  # or raise
        if idle_ahead(failure.old, now_ms // 1000):
            return session  # the deadline counts from later than our clock: nothing to move
        # Live by our clock but not by the condition: nothing explains the refusal.
        raise DynamoDBError("ConditionalCheckFailedException", repr(failure.old))


def touch(table: Table, session_id: str, owner: str | None) -> Session:
    """Keep a session alive for a reader that writes nothing: one UpdateItem."""
    what = f"touch of session {session_id!r}"
    session = table.memory.remember(table.drive(Touch(table.name, session_id, owner), what))
    return reads.landed(table, session, what)
