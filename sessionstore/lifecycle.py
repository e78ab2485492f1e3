"""The session lifecycle: statuses, the one table of allowed moves, and the guarded move.

A session is created ``initializing`` and moves ``active`` -> ``closing`` -> ``closed`` (or
``initializing`` -> ``closing``); ``TRANSITIONS`` is the only source of truth. A move is one
UpdateItem whose condition lists the statuses it may come from (``StatusEdit``), so no read is
needed and no read-then-write race exists: two instances closing one session cannot both move
it. A refused move is explained from the item the refusal returns (ALL_OLD): asking for the
status the session already has is a no-op success, anything else not in the table is
``InvalidTransition``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from . import write_tokens
from .attempts import gave_up
from .errors import InvalidTransition, SessionAlreadyExists, SessionStoreError
from .expressions import Expr
from .wire import Cancelled, ConditionFailed

if TYPE_CHECKING:
    from .models import Session


class Status(StrEnum):
    INITIALIZING = "initializing"
    ACTIVE = "active"
    CLOSING = "closing"
    CLOSED = "closed"


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


@dataclass(slots=True)
class StatusEdit:
    """Move the session to ``to`` (an ``Edit`` for ``locking.MetadataWrite``): the condition
    lists the allowed source statuses. ``transition`` sends it last-writer-wins (the condition
    is the guard); ``update_status`` pins it to the version it read, as the source design's
    read-modify-write did."""

    session_id: str
    to: Status

    def clauses(self, e: Expr) -> tuple[str, str, str]:
        status = e.n("status")
        froms = sources(self.to)
        if froms:
            condition = f"{status} IN ({', '.join(e.v(s.value) for s in froms)})"
        else:  # nothing leads here: refused, and the refusal reports the current status
            condition = f"attribute_not_exists({e.n('pk')})"
        return f"{status} = {e.v(self.to.value)}", "", condition

    def token_value(self, e: Expr, now_s: int) -> str:
        return e.v(now_s)

    def judge(self, current: Session) -> Session | None:
        if current.status is self.to:
            return current  # already there: nothing to write
        if self.to not in TRANSITIONS[current.status]:
            raise InvalidTransition(self.session_id, current.status, self.to)
        return None


@dataclass(slots=True)
class CreateSession:
    """PutItem of a new session's metadata item (``item.new_item``, wire form) if the id is
    free -- in one transaction with its attributes item when it has attributes. A refusal whose
    item names our token is our own lost attempt."""

    table: str
    session_id: str
    item: dict[str, Any]
    token: str
    attributes: dict[str, Any] | None = None  # wire form
    operation: str = field(init=False)

    def __post_init__(self) -> None:
        self.operation = "put_item" if self.attributes is None else "transact_write_items"

    def request(self, now_ms: int) -> dict[str, Any]:
        e = Expr()
        put = {
            "TableName": self.table,
            "Item": self.item,
            "ConditionExpression": f"attribute_not_exists({e.n('pk')})",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.params(),
        }
        if self.attributes is None:
            return put
        # Unconditional: an earlier session's attributes item (TTL deletes late) is replaced.
        attributes = {"TableName": self.table, "Item": self.attributes}
        return {"TransactItems": [{"Put": put}, {"Put": attributes}]}

    def succeeded(self, response: dict[str, Any]) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> None:
        old = failure.old if isinstance(failure, ConditionFailed) else failure.old(0)
        if old is not None and write_tokens.carries(old, self.token):
            return None
        raise SessionAlreadyExists(self.session_id)

    def maybe_landed(self) -> None:
        pass

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"create session {self.session_id!r}", attempts)
