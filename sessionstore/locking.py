"""Optimistic locking: the version condition, and the one write plan for the metadata item.

Every write to the metadata item bumps ``version`` by one, so a reader can tell two copies
apart; only a *pinned* write is also conditioned on it (``version_guard``, as PynamoDB's
``_handle_version_attribute`` does it): one given ``expected_version``, where a stale version is
``VersionConflict``, and ``update_status``, computed from the item as read and retried on the
version the refusal's ALL_OLD carries (one request per retry, never a re-read). Appends,
attribute changes and transitions go last writer wins: they are right on top of whatever version
is current, so concurrent writers never refuse each other.

``MetadataWrite`` adds to the edit's own clauses (``Edit``) what every write has: the guards
(the session exists, is alive and is the caller's), the version guard, the request token
(``write_tokens``) and the idle deadline moved on (``expressions.extend_idle``), so an accepted
write keeps an idle session alive in the request it sends anyway. Its refusal interpreter reads
the ALL_OLD item once, in order: our token (our lost attempt landed), not live, the edit's
verdict (already done, or not allowed), a stale version, a full token map.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import schema, write_tokens
from .attempts import RETRY, Retry, gave_up
from .clock import format_timestamp
from .errors import (
    ConflictRetriesExhausted,
    DynamoDBError,
    SessionStoreError,
    Unavailable,
    VersionConflict,
)
from .expressions import Expr, all_of, extend_idle, idle_ahead, live_session
from .item import live, owned, session_from_item
from .models import Session
from .wire import Cancelled, ConditionFailed, to_python


def version_guard(e: Expr, version: int | None) -> tuple[str, str]:
    """``(condition, SET action)`` for the version: pinned to ``version``, or -- None -- last
    writer wins (no condition). Either way the version goes up by exactly one."""
    v = e.n("version")
    condition = "" if version is None else f"{v} = {e.v(version)}"
    return condition, f"{v} = {v} + {e.v(1)}"


def _update_metadata(
    table: str, session_id: str, e: Expr, update: str, condition: str
) -> dict[str, Any]:
    """An UpdateItem of the metadata item that returns it: ALL_NEW, or ALL_OLD when refused."""
    return {
        "TableName": table,
        "Key": schema.meta_key(session_id),
        "UpdateExpression": update,
        "ConditionExpression": condition,
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        **e.params(),
    }


class Edit(Protocol):
    """What a write to the metadata item changes, besides the version, ``updatedAt`` and the
    request token (which ``MetadataWrite`` adds)."""

    def clauses(self, e: Expr) -> tuple[str, str, str]:
        """``(SET actions, REMOVE actions, condition)``, each possibly empty."""

    def token_value(self, e: Expr, now_s: int) -> str:
        """What the write stores under its token (an expression)."""

    def judge(self, current: Session) -> Session | None:
        """After a refusal, on the live item: a result (nothing to write), None (write it), or
        raise the typed error (not allowed)."""


@dataclass(slots=True)
class MetadataWrite:
    """One write to the metadata item, run by the attempt driver (``attempts.drive``).

    ``version``: pinned to it, or None (last writer wins). ``expected``: the version is the
    caller's, so a stale one raises ``VersionConflict`` instead of being retried.
    ``seen_tokens`` / ``settled``: what ``write_tokens.removable`` may remove.
    """

    table: str
    session_id: str
    owner: str | None
    token: str
    edit: Edit
    remember: Callable[[Session], None]
    version: int | None = None
    expected: bool = False
    seen_tokens: Mapping[str, int] | None = None
    settled: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()  # the tokens the last attempt removes
    extend: bool = True  # move the idle deadline on (not when our clock lags the item's)
    attempted: int | None = None  # the version the last pinned attempt expected
    current: Session | None = field(default=None, repr=False)

    operation = "update_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        e = Expr()
        now_s = now_ms // 1000
        alive = live_session(e, owner=self.owner, now_s=now_s)
        sets, removes, edit_condition = self.edit.clauses(e)
        version_condition, version_set = version_guard(e, self.version)
        self.attempted = self.version
        self.removed = write_tokens.removable(self.seen_tokens, self.settled, self.token, now_s)
        token_condition, token_set, token_removes = write_tokens.name_token(
            e, self.token, self.edit.token_value(e, now_s), self.removed, self.seen_tokens
        )
        stamp = f"{e.n('updatedAt')} = {e.v(format_timestamp(now_ms))}"
        # Every accepted write keeps an idle session alive -- never moving its deadline back.
        idle, idle_condition = extend_idle(e, now_s) if self.extend else ("", "")
        update = "SET " + ", ".join(s for s in (sets, stamp, idle, version_set, token_set) if s)
        dropped = ", ".join(r for r in (removes, token_removes) if r)
        if dropped:
            update += " REMOVE " + dropped
        condition = all_of(
            alive, edit_condition, version_condition, token_condition, idle_condition
        )
        return _update_metadata(self.table, self.session_id, e, update, condition)

    def succeeded(self, response: dict[str, Any]) -> Session:
        return self._keep(session_from_item(to_python(response["Attributes"]) or {}))

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Session | Retry:
        assert isinstance(failure, ConditionFailed)
        old = failure.old
        self.removed = ()  # which attempt landed is unknown: keep them for the next write
        if old is not None and owned(old, self.owner) and write_tokens.carries(old, self.token):
            return self._keep(session_from_item(old))  # our lost attempt had landed
        current = self._keep(live(self.session_id, old, self.owner, now_ms // 1000))
        self.current = current
        self.seen_tokens = current.write_tokens
        done = self.edit.judge(current)
        if done is not None:
            return done
        if self.extend and idle_ahead(old, now_ms // 1000):
            self.extend = False  # our clock lags: write without moving the deadline back
            return RETRY
        if self.version is not None and current.version != self.version:
            if self.expected:
                raise VersionConflict(self.session_id, self.version, current)
            self.version = current.version  # optimistic retry, on the version ALL_OLD shows
            return RETRY
        tokens = current.write_tokens
        if len(tokens) >= write_tokens.TOKEN_CAP:
            gone = write_tokens.removable(tokens, self.settled, self.token, now_ms // 1000)
            if any(k in tokens for k in gone):
                return RETRY  # removes them this time, which makes room
            raise Unavailable(
                f"session {self.session_id!r}: {len(current.write_tokens)} writes of the last "
                f"{write_tokens.TOKEN_HORIZON_S} s hold request tokens; try again later",
                maybe_applied=False,
            )
        # Every condition holds on the item as it is: nothing explains the refusal.
        raise DynamoDBError("ConditionalCheckFailedException", repr(old))

    def maybe_landed(self) -> None:
        pass  # the token settles it: a landed attempt is found in ``tk`` by the next refusal

    def exhausted(self, attempts: int) -> SessionStoreError:
        assert self.current is not None  # a conflict was seen, so the item was too
        attempted = self.current.version if self.attempted is None else self.attempted
        return ConflictRetriesExhausted(self.session_id, attempted, self.current, attempts)

    def _keep(self, session: Session) -> Session:
        self.remember(session)
        return session


@dataclass(slots=True)
class Touch:
    """``SessionStore.touch``: move an idle session's deadline on and change nothing else -- no
    version bump, no request token: re-sending it (a lost response) only moves the deadline
    again, to the same place or later, which is what was asked."""

    table: str
    session_id: str
    owner: str | None
    remember: Callable[[Session], None]

    operation = "update_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        e = Expr()
        now_s = now_ms // 1000
        sets, not_back = extend_idle(e, now_s)
        condition = all_of(live_session(e, owner=self.owner, now_s=now_s), not_back)
        return _update_metadata(self.table, self.session_id, e, "SET " + sets, condition)

    def succeeded(self, response: dict[str, Any]) -> Session:
        session = session_from_item(to_python(response["Attributes"]) or {})
        self.remember(session)
        return session

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Session | Retry:
        assert isinstance(failure, ConditionFailed)
        session = live(self.session_id, failure.old, self.owner, now_ms // 1000)  # or raise
        if idle_ahead(failure.old, now_ms // 1000):
            self.remember(session)
            return session  # the deadline counts from later than our clock: nothing to move
        # Live by our clock but not by the condition: nothing explains the refusal.
        raise DynamoDBError("ConditionalCheckFailedException", repr(failure.old))

    def maybe_landed(self) -> None:
        pass  # harmless either way: the next attempt moves the deadline again

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"touch of session {self.session_id!r}", attempts)
