"""Optimistic locking: the version condition, and the one write of the metadata item.

Layer: a pattern module, over ``table`` (its ``memory`` inside); the other patterns that write the
metadata item (``lifecycle``, ``context``, ``attributes``) send their change through ``write``.

Every write to the metadata item bumps ``version`` by one (``version_up``), so a reader can tell
two copies apart; only a *pinned* write is also conditioned on it (``version_is``, as PynamoDB's
``_handle_version_attribute`` does it): one given ``expected_version``, where a stale version is
``VersionConflict``, and ``update_status``, computed from the item as read and retried on the
version the refusal's ALL_OLD carries (one request per retry, never a re-read). Appends,
attribute changes and transitions go last writer wins: they are right on top of whatever version
is current, so concurrent writers never refuse each other.

``MetadataWrite`` sends the edit's own clauses (``Edit``: the guard its notebook teaches), the
version, and ``every_write``: what every write shares (alive and the caller's, ``updatedAt``,
the request token and its room, the idle deadline moved on). Its refusal interpreter
(``refused``, with a table) reads ALL_OLD once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

from . import schema, write_tokens
from .clock import format_timestamp
from .conditions import TRUE, Clause, Condition, Name, Update, Value, clause, set_, update_item
from .errors import (
    ConflictRetriesExhausted,
    DynamoDBError,
    SessionStoreError,
    TokensFull,
    VersionConflict,
)
from .item import Meta, alive, idle_ahead, idle_moved, live, owned, session_from_item
from .models import Session
from .table import Again, Plan, Table
from .wire import Cancelled, ConditionFailed, to_python

__all__ = ["Edit", "MetadataWrite", "Wrote", "version_is", "version_up", "write"]


def version_is(version: int | None) -> Condition:
    """Pinned to ``version``, or -- None -- last writer wins: no condition."""
    if version is None:
        return TRUE
    return clause("version_is", "{} = {}", Name(Meta.VERSION), Value(version))


def version_up() -> Update:
    """In every write to the metadata item."""
    return set_("version_up", "{} = {} + {}", Name(Meta.VERSION), Name(Meta.VERSION), Value(1))


class Edit(Protocol):
    """What a write to the metadata item changes, besides the version, ``updatedAt``, the idle
    deadline and the request token (which ``MetadataWrite`` adds)."""

    def update(self) -> Update:
        """Its SET and REMOVE actions."""

    def condition(self) -> Condition:
        """Its own guard."""

    def token_value(self, now_s: int) -> Clause:
        """What the write stores under its token."""

    def judge(self, current: Session) -> Session | None:
        """After a refusal, on the live item: a result (nothing to write), None (write it), or
        raise the typed error (not allowed)."""


class Wrote(NamedTuple):
    """A landed write: the item it left, the tokens it removed (none if a refusal showed it)."""

    session: Session
    removed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MetadataWrite(Plan[Wrote]):
    """One write to the metadata item. ``version``: pinned to it, or None (last writer wins);
    ``expected``: the caller's version, so a stale one raises instead of being retried."""

    table: str
    session_id: str
    owner: str | None
    token: str
    edit: Edit
    version: int | None = None
    expected: bool = False
    seen_tokens: Mapping[str, int] | None = None  # with ``settled``: what ``removed`` may name
    settled: tuple[str, ...] = ()
    extend: bool = True  # move the idle deadline on (not when our clock lags the item's)
    current: Session | None = None  # the item as the last refusal showed it
    attempted: int | None = None  # the version the last refused attempt was pinned to

    operation: ClassVar[str] = "update_item"

    def removed(self, now_s: int) -> tuple[str, ...]:
        return write_tokens.removable(self.seen_tokens, self.settled, self.token, now_s)

    def parts(self, now_ms: int) -> tuple[Update, Condition]:
        """The update and the condition of this attempt, as values: the edit's own (its guard:
        the lesson of its notebook), the version (02), and what every write shares."""
        shared_update, shared_condition = self.every_write(now_ms)
        update = self.edit.update() + version_up() + shared_update
        condition = self.edit.condition() & version_is(self.version) & shared_condition
        return update, condition

    def every_write(self, now_ms: int) -> tuple[Update, Condition]:
        """What every write to the metadata item carries, whatever its edit: the session alive
        and the caller's (05), ``updatedAt``, the request token with room for it in ``tk``
        (06), and -- unless our clock lags the item's -- the idle deadline moved on, never back
        (05)."""
        now_s = now_ms // 1000
        gone = self.removed(now_s)
        at = set_("updated_at", "{} = {}", Name(Meta.UPDATED_AT), Value(format_timestamp(now_ms)))
        token = write_tokens.name_token(self.token, self.edit.token_value(now_s), gone)
        update = at + token
        condition = (
            alive(self.owner, now_s)
            & write_tokens.token_absent(self.token)
            & write_tokens.room(gone, self.seen_tokens)
        )
        if self.extend:
            moved, not_back = idle_moved(now_s)
            update, condition = update + moved, condition & not_back
        return update, condition

    def request(self, now_ms: int) -> dict[str, Any]:
        update, condition = self.parts(now_ms)
        return update_item(self.table, schema.meta_key(self.session_id), update, condition)

    def transaction_action(self, now_ms: int) -> dict[str, Any]:
        """This write as the first action of a transaction (``attributes``, ``lifecycle``): the
        same update and condition, nothing returned."""
        update, condition = self.parts(now_ms)
        key = schema.meta_key(self.session_id)
        return {"Update": update_item(self.table, key, update, condition, returns=None)}

    def refused_first(self, failure: Cancelled, now_ms: int) -> Wrote | MetadataWrite:
        """``refused``, for a transaction whose first action this write was and whose first
        action failed: the result, or this write as it is to be sent again."""
        verdict = self.refused(ConditionFailed(failure.old(0), failure.ambiguous), now_ms)
        if isinstance(verdict, Again):
            assert isinstance(verdict.plan, MetadataWrite)
            return verdict.plan
        return verdict

    def succeeded(self, response: dict[str, Any], now_ms: int) -> Wrote:
        item = to_python(response["Attributes"]) or {}
        return Wrote(session_from_item(item), self.removed(now_ms // 1000))

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Wrote | Again[Wrote]:
        """Why the condition failed, read from ALL_OLD once, in this order:

        ======================================  ==============================================
        what the old item shows                 the ending
        ======================================  ==============================================
        our request token                       our lost attempt had landed: its result
        missing, expired or another's           ``SessionNotFound`` / ``SessionExpired``
        the edit's verdict (``Edit.judge``)     its result (nothing to write) or its error
        an idle deadline ahead of our clock     ``Again``, not moving the deadline
        another version, pinned by the caller   ``VersionConflict``
        another version, pinned by us           ``Again`` on the version ALL_OLD shows
        a full token map                        ``Again`` if this write frees room, else
                                                ``TokensFull``
        none of these                           ``DynamoDBError``: nothing explains it
        ======================================  ==============================================
        """
        assert isinstance(failure, ConditionFailed)
        old, now_s = failure.old, now_ms // 1000
        if old is not None and owned(old, self.owner) and write_tokens.carries(old, self.token):
            return Wrote(session_from_item(old), ())  # our lost attempt had landed
        current = live(self.session_id, old, self.owner, now_s)
        done = self.edit.judge(current)
        if done is not None:
            return Wrote(done, ())
        learnt = dataclasses.replace(
            self, current=current, seen_tokens=current.write_tokens, attempted=self.version
        )
        if self.extend and idle_ahead(old, now_s):
            return Again(dataclasses.replace(learnt, extend=False))  # our clock lags
        if self.version is not None and current.version != self.version:
            if self.expected:
                raise VersionConflict(self.session_id, self.version, current)
            # Optimistic retry, on the version ALL_OLD shows.
            return Again(dataclasses.replace(learnt, version=current.version))
        tokens = current.write_tokens
        if len(tokens) >= write_tokens.TOKEN_CAP:
            if any(k in tokens for k in learnt.removed(now_s)):
                return Again(learnt)  # removes them this time, which makes room
            raise TokensFull(self.session_id, current, len(tokens), write_tokens.TOKEN_HORIZON_S)
        # Every condition holds on the item as it is: nothing explains the refusal.
        raise DynamoDBError("ConditionalCheckFailedException", repr(old))

    def exhausted(self, what: str, attempts: int) -> SessionStoreError:
        assert self.current is not None  # a conflict was seen, so the item was too
        attempted = self.current.version if self.attempted is None else self.attempted
        return ConflictRetriesExhausted(self.session_id, attempted, self.current, attempts)


def planned(
    table: Table,
    session_id: str,
    owner: str | None,
    edit: Edit,
    token: str,
    *,
    version: int | None = None,
    expected: bool = False,
    seen: Session | None = None,
) -> MetadataWrite:
    """``edit``'s write, removing what ``seen`` (default: the hint) and settled writes allow."""
    seen = seen or table.memory.hint(session_id, owner, table.now_ms() // 1000)
    return MetadataWrite(
        table.name,
        session_id,
        owner,
        token,
        edit,
        version=version,
        expected=expected and version is not None,
        seen_tokens=seen.write_tokens if seen is not None else None,
        settled=table.memory.settled.get(session_id) or (),
    )


def write(
    table: Table,
    session_id: str,
    owner: str | None,
    edit: Edit,
    *,
    version: int | None = None,
    expected: bool = False,
    token: str | None = None,
) -> Wrote:
    """Send ``edit`` as one ``MetadataWrite``, pinned to ``version`` or last writer wins, and
    remember what came back. The write's token is settled whatever the ending (only a write
    known to have landed removed what its last attempt named) -- unless the caller gave the
    token: then it settles it when its own write is over (an append, after its page)."""
    settle = token is None
    token = table.token() if token is None else token
    plan = planned(table, session_id, owner, edit, token, version=version, expected=expected)
    wrote: Wrote | None = None
    try:
        with table.memory.refusals():
            wrote = table.drive(plan, f"write to session {session_id!r}")
    finally:
        if settle or wrote is None:
            table.memory.settle(session_id, token, () if wrote is None else wrote.removed)
    table.memory.remember(wrote.session)
    return wrote
