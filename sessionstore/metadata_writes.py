"""Writes to a session's metadata item: transitions, and ``SessionWrite`` with its edits.

Plans for the attempt driver like the rest of ``sessionstore.writes`` (request builders and
outcome interpreters; nothing here sends, reads or sleeps). A transition names its token in
``tx_<status>``; every other change to the item is a ``SessionWrite`` carrying an ``Edit``
(``StatusEdit``, ``AttributesEdit``, and ``pages.AppendEdit``), pinned to a version or
commuting.

Why appends and attribute changes *commute* (issue 12): without ``expected_version`` such a
write is right on top of any version -- a retried version conflict re-sent the same change on the
new version anyway -- so the version condition only made concurrent writers refuse each other
(2.07 requests per committed append with 8 writers). The version is still bumped by exactly one
(``ADD``), for readers and for ``expected_version``. Proving a lost attempt's outcome then cannot
use the version-keyed ring (the new version is not known when the request is built), so the
token is *named* in a map, ``tk.<token>``, under ``attribute_not_exists(tk.<token>)``: a re-sent
copy of a landed attempt is always refused, and ALL_OLD shows the token however many writes came
in between (the ring could be overrun). The map is kept small by the writes themselves (see
``SessionWrite``), so it costs no extra request; the alternatives cost one (a separate token
item, or a transaction) or gave up exactly-once appends.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from . import schema
from .attempts import RETRY, Retry
from .clock import format_timestamp
from .errors import (
    ConflictRetriesExhausted,
    DynamoDBError,
    InvalidTransition,
    ItemTooLarge,
    SessionNotActive,
    SessionStoreError,
    Unavailable,
    VersionConflict,
)
from .expressions import LIVE_OWNED, LIVE_UNOWNED, Expr, status_in
from .models import Session
from .status import Status, allowed, sources
from .wire import Cancelled, ConditionFailed
from .writes import gave_up, live, owned, ring, tx_attribute

#: Commuting writes name their token in the map ``tk``; at most this many names at once.
TOKEN_CAP = 16
#: A token older than this (seconds) belongs to a write that ended long ago: anyone removes it.
#: A write lives at most botocore's attempts (5 x 60 s read timeout + backoff) times the
#: driver's settling re-sends (3): about 20 minutes in the worst case. An hour is far beyond.
TOKEN_HORIZON_S = 3600
#: An append's token value is ``<now_s> * SEQ_SPAN + <first seq of its page>``: its time, for
#: the horizon, and the seq its landed attempt reserved, for the page write after a lost
#: response. Other tokens hold ``<now_s>`` alone (always below ``SEQ_SPAN``).
SEQ_SPAN = 10**12


def token_time(value: int) -> int:
    """When a ``tk`` entry was written (epoch seconds)."""
    return value // SEQ_SPAN if value >= SEQ_SPAN else value


def token_seq(value: int) -> int:
    """The first seq an append's ``tk`` entry reserved."""
    return value % SEQ_SPAN


class _AnswersWithSession:
    """Plans on the metadata item answer with it as a ``Session`` and keep it as a hint."""

    __slots__ = ()

    remember: Callable[[Session], None]

    def succeeded(self, response: dict[str, Any]) -> Session:
        session = Session.from_wire(response["Attributes"])
        self.remember(session)
        return session

    def _session(self, item: dict[str, Any]) -> Session:
        return self._session_from(Session.from_item(item))

    def _session_from(self, session: Session) -> Session:
        self.remember(session)
        return session


class Transition(_AnswersWithSession):
    """One UpdateItem whose condition lists the allowed source statuses: no read first."""

    __slots__ = ("owner", "remember", "session_id", "table", "to", "token")

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

    def request(self, now_ms: int) -> dict[str, Any]:
        # Written out (see ``SessionWrite.request``): the condition and update are fixed text,
        # and what depends only on the target status is made once per status.
        names, to, froms, condition = _TRANSITION_TEXT[self.to]
        values: dict[str, Any] = {
            ":nows": {"N": str(now_ms // 1000)},
            ":now": {"S": format_timestamp(now_ms)},
            ":to": to,
            ":token": {"S": self.token},
            ":one": _ONE,
        }
        if self.owner is None:
            alive = LIVE_UNOWNED
        else:
            alive = LIVE_OWNED
            values[":owner"] = {"S": self.owner}
        values.update(froms)
        return {
            "TableName": self.table,
            "Key": schema.meta_key(self.session_id),
            "UpdateExpression": (
                "SET #status = :to, #updatedAt = :now, #tx = :token ADD #version :one"
            ),
            "ConditionExpression": alive + condition,
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "ExpressionAttributeNames": dict(names),
            "ExpressionAttributeValues": values,
        }

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
        return gave_up(f"transition of session {self.session_id!r}", attempts)


class Edit(Protocol):
    """What a write to the metadata item changes, apart from the version, ``updatedAt`` and its
    request token (which ``SessionWrite`` adds)."""

    def clauses(self, e: Expr, exact: Session | None) -> tuple[str, str, str]:
        """``(SET actions, REMOVE actions, extra condition)``, each possibly empty.

        ``exact`` is the item the attempt is pinned to (by its version) when known: the clauses
        may then use what it holds. Otherwise they must be right whatever the item holds."""
        ...

    def judge(self, current: Session) -> Session | None:
        """After a refusal: a result (nothing to write), None (write it), or raise."""
        ...

    def needs_exact(self, current: Session) -> bool:
        """The unpinned clauses would be refused on ``current`` although the pinned ones fit."""
        ...

    def token_value(self, e: Expr, now_s: int) -> str:
        """What a commuting attempt stores under its token in ``tk`` (``:nows`` is bound)."""
        ...

    def ring_value(self, token: str, now_s: int) -> str:
        """What a pinned attempt stores in its ring slot: the token, then anything after a
        space (tokens have none)."""
        ...

    #: The edit must learn what its landed attempt did from ``tk`` (appends: the seq they
    #: reserved), so with ``expected_version`` it goes in the commuting form plus a version
    #: condition instead of the pinned form.
    named_when_expected: bool


class SessionWrite(_AnswersWithSession):
    """One write to the metadata item: the version goes up by exactly one, the ``updatedAt``
    stamp moves, and a request token proves a lost attempt's outcome. Two forms:

    **Pinned** (``version = :v`` in the condition): what ``expected_version`` asks for, and what
    a change that depends on the item as read needs (``update_status``). The token goes into
    ring slot ``w<new version % RING_SIZE>``; a refusal that finds it there means our lost
    attempt landed. Once more writes than the ring holds have followed an attempt whose
    response was lost, its outcome can no longer be proven, and the write ends ``Unavailable``
    rather than risk applying twice. A stale version is retried with the version ALL_OLD
    carries -- one request per retry, never a re-read.

    **Commuting** (appends, attribute changes without ``expected_version``): no version
    condition -- the change is right on top of whatever version is current, which is exactly
    what a retried conflict would have done, so concurrent writers no longer refuse each other.
    ``ADD version 1`` keeps the version counting writes. The token is *named*: ``SET
    tk.<token> = <now_s>`` on the condition ``attribute_not_exists(tk.<token>)``, so an attempt
    whose earlier copy landed (a lost response, retried by botocore or by the driver) is refused
    and ALL_OLD shows the token. No version arithmetic is involved, so no number of rival
    writes in between can hide it. The map is bounded: ``size(tk) < TOKEN_CAP`` is part of the
    condition, and each write removes tokens known to be dead -- this instance's own finished
    writes to the session (``settled``), and any token older than ``TOKEN_HORIZON_S`` seen in
    the last copy of the item. A token is needed only while its write may still be re-sent;
    the horizon is far beyond any write's life (botocore's attempts with their timeouts, and
    the driver's settling re-sends: minutes), so removing an old token never removes a live one.

    When the commuting form cannot go (the map is full of live tokens, the item predates
    ``tk``/``attrs``, or a size bound needs the exact item) the next attempt is pinned to the
    version ALL_OLD shows, with ``exact`` clauses computed from that item; the next write
    commutes again.
    """

    __slots__ = (
        "attempted",
        "commutes",
        "commuting",
        "current",
        "edit",
        "exact",
        "expected",
        "named",
        "owner",
        "remember",
        "removed",
        "seen_tokens",
        "session_id",
        "settled",
        "table",
        "token",
        "uncertain_since",
        "version",
    )

    operation = "update_item"

    def __init__(
        self,
        table: str,
        session_id: str,
        owner: str | None,
        token: str,
        edit: Edit,
        remember: Callable[[Session], None],
        *,
        commutes: bool,
        version: int | None,
        expected: int | None = None,
        seen_tokens: Mapping[str, Any] | None = None,
        settled: tuple[str, ...] = (),
    ) -> None:
        self.table = table
        self.session_id = session_id
        self.owner = owner
        self.token = token
        self.edit = edit
        self.remember = remember
        self.expected = expected
        # The edit may go on top of any version (or, when it must be named, any that matches).
        self.commutes = commutes and (expected is None or edit.named_when_expected)
        self.commuting = self.commutes and (version is None or expected is not None)
        self.version = 0 if version is None else version
        self.exact: Session | None = None  # the item a pinned attempt's clauses were built on
        self.seen_tokens = seen_tokens
        self.settled = settled
        self.removed: tuple[str, ...] = ()  # tokens the last attempt removes
        self.named = False  # some attempt named our token in ``tk``
        self.uncertain_since: int | None = None  # version of a pinned attempt whose answer was lost
        self.attempted = self.version  # the version the last pinned attempt expected
        self.current: Session | None = None

    def request(self, now_ms: int) -> dict[str, Any]:
        # The fixed part of every attempt is written out, not built placeholder by placeholder:
        # this runs on every write, and the library's own CPU time per call is budgeted.
        e = Expr()
        now_s = now_ms // 1000
        e.names.update(_FIXED_NAMES)
        values = e.values
        values[":now"] = {"S": format_timestamp(now_ms)}
        values[":nows"] = {"N": str(now_s)}
        if self.owner is None:
            alive = LIVE_UNOWNED
        else:
            alive = LIVE_OWNED
            values[":owner"] = {"S": self.owner}
        sets, removes, extra = self.edit.clauses(e, self.exact)
        extra = f" AND ({extra})" if extra else ""
        gone = self._removable(now_s)
        drop = [f"#tk.{e.k(t)}" for t in gone]
        if removes:
            drop.append(removes)
        if self.commuting:
            self.named = True
            e.names["#tok"] = self.token
            values[":cap"] = _CAP
            values[":one"] = _ONE
            if self.expected is not None:
                values[":expected"] = {"N": str(self.expected)}
                extra += " AND (#version = :expected)"
            condition = (
                f"{alive} AND (attribute_exists(#tk) AND size(#tk) < :cap) "
                f"AND (attribute_not_exists(#tk.#tok)){extra}"
            )
            value = self.edit.token_value(e, now_s)
            update = f"SET {sets}, #updatedAt = :now, #tk.#tok = {value}"
            if drop:
                update += " REMOVE " + ", ".join(drop)
            update += " ADD #version :one"
        else:
            self.attempted = self.version
            new_version = self.version + 1
            values[":expected"] = {"N": str(self.version)}
            values[":next"] = {"N": str(new_version)}
            slot = schema.ring_slot(new_version)
            e.names["#slot"] = slot
            condition = f"{alive} AND (#version = :expected){extra}"
            values[":token"] = {"S": self.edit.ring_value(self.token, now_s)}
            update = f"SET {sets}, #updatedAt = :now, #version = :next, #slot = :token"
            if self.exact is not None and self.exact.write_tokens is None:
                values[":nomap"] = {"M": {}}
                update += ", #tk = :nomap"  # an item from before ``tk``: start the map
            elif not gone:
                del e.names["#tk"]  # unused placeholders are refused
            if drop:
                update += " REMOVE " + ", ".join(drop)
        self.removed = gone
        return {
            "TableName": self.table,
            "Key": schema.meta_key(self.session_id),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "ExpressionAttributeNames": e.names,
            "ExpressionAttributeValues": values,
        }

    def _removable(self, now_s: int) -> tuple[str, ...]:
        """Dead tokens to remove in this attempt -- only where ``tk`` is known to exist (a
        commuting attempt's condition guarantees it; a pinned one knows its item)."""
        if not self.commuting and (self.exact is None or self.exact.write_tokens is None):
            return ()
        token = self.token
        gone = [t for t in self.settled if t != token]
        seen = self.seen_tokens
        if seen:
            # ``token_time(v) <= horizon``, without a call per token: a plain time is at most
            # the horizon, an append's value is below the first value of the next second.
            horizon = now_s - TOKEN_HORIZON_S
            below = (horizon + 1) * SEQ_SPAN
            gone += [
                t
                for t, v in seen.items()
                if (v <= horizon or SEQ_SPAN <= v < below) and t != token and t not in gone
            ]
            if not self.commuting:
                gone = [t for t in gone if t in seen]
        elif not self.commuting:
            return ()
        return tuple(gone[:TOKEN_CAP])

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Session | Retry:
        assert isinstance(failure, ConditionFailed)
        old = failure.old
        if old is not None and owned(old, self.owner) and _carries(old, self.token):
            self.removed = ()  # which attempt landed is unknown: keep them for the next write
            return self._session(old)  # our lost attempt had landed
        self.removed = ()
        current = live(self.session_id, old, self.owner, now_ms // 1000)
        self.remember(current)
        self.current = current
        self.seen_tokens = current.write_tokens
        if (
            self.uncertain_since is not None
            and current.version >= self.uncertain_since + 1 + schema.RING_SIZE
        ):
            raise Unavailable(
                f"session {self.session_id!r}: a write's response was lost and its outcome "
                "can no longer be proven",
                maybe_applied=True,
            )
        self.uncertain_since = None  # the ring (or ``tk``) still covers it: it did not land
        done = self.edit.judge(current)
        if done is not None:
            return done
        if self.expected is not None and current.version != self.expected:
            raise VersionConflict(self.session_id, self.expected, current)
        tokens = current.write_tokens
        can_commute = (
            self.commutes
            and tokens is not None
            and len(tokens) < TOKEN_CAP
            and not self.edit.needs_exact(current)
        )
        if can_commute and self.commuting:
            # Every condition of the commuting form holds on the item as it is: unexplained.
            raise DynamoDBError("ConditionalCheckFailedException", repr(old))
        if not self.commuting and current.version == self.version and self.exact is not None:
            raise DynamoDBError("ConditionalCheckFailedException", repr(old))
        if can_commute:
            self.commuting, self.exact = True, None
        else:
            # Pinned to the item ALL_OLD shows (so the exact clauses are right): a different
            # version, or the same one with exact clauses -- never the attempt just refused.
            self.commuting, self.version, self.exact = False, current.version, current
        return RETRY

    def maybe_landed(self) -> None:
        if self.uncertain_since is None and not self.commuting:
            self.uncertain_since = self.version

    def exhausted(self, attempts: int) -> SessionStoreError:
        assert self.current is not None  # a conflict was seen, so the item was too
        return ConflictRetriesExhausted(self.session_id, self.attempted, self.current, attempts)


_FIXED_NAMES = {
    "#pk": "pk",
    "#ttl": "ttl",
    "#owner": "owner",
    "#version": "version",
    "#updatedAt": "updatedAt",
    "#tk": "tk",
}
_CAP = {"N": str(TOKEN_CAP)}
_ONE = {"N": "1"}


def _transition_text(
    to: Status,
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, str]], str]:
    """A transition's fixed part: its names, ``:to``, the source statuses' values, and the
    condition after the live-session part."""
    names = {**_FIXED_NAMES, "#status": "status", "#tx": tx_attribute(to)}
    del names["#tk"]
    froms = {f":from{i}": {"S": s.value} for i, s in enumerate(sources(to))}
    if froms:
        condition = f" AND (#status IN ({', '.join(froms)}))"
    else:  # nothing leads here: let the failure report the current status
        condition = " AND (attribute_not_exists(#pk))"
    return names, {"S": to.value}, froms, condition


_TRANSITION_TEXT = {to: _transition_text(to) for to in Status}


def _carries(item: dict[str, Any], token: str) -> bool:
    """``item`` holds ``token``: named in ``tk``, or in a ring slot."""
    tokens = item.get("tk")
    return (tokens is not None and token in tokens) or token in ring(item)


class StatusEdit:
    """``update_status``: the move is checked against the lifecycle table on the item as read,
    and again by the condition (the allowed source statuses)."""

    __slots__ = ("froms", "session_id", "status")

    def __init__(self, session_id: str, status: Status) -> None:
        self.session_id = session_id
        self.status = status
        self.froms = [s.value for s in sources(status)]

    def clauses(self, e: Expr, exact: Session | None) -> tuple[str, str, str]:
        cond = status_in(e, self.froms) if self.froms else f"attribute_not_exists({e.n('pk')})"
        return f"{e.n('status')} = {e.v(self.status.value)}", "", cond

    def judge(self, current: Session) -> Session | None:
        if current.status is self.status:
            return current
        if not allowed(current.status, self.status):
            raise InvalidTransition(self.session_id, current.status, self.status)
        return None

    def needs_exact(self, current: Session) -> bool:
        return False

    def token_value(self, e: Expr, now_s: int) -> str:
        return ":nows"

    def ring_value(self, token: str, now_s: int) -> str:
        return token

    named_when_expected = False


#: The most bytes a session's attributes may take (the ``attrs`` map, sized by DynamoDB's rules:
#: 3 + name + JSON text + 1 per attribute). Part of ``METADATA_OVERHEAD``.
ATTRIBUTES_MAX_BYTES = 4096
EMPTY_MAP_BYTES = 3


_ATTRIBUTE_NAMES = {"#attrs": "attrs", "#attrBytes": "attrBytes", "#status": "status"}
_CLOSED = {"S": Status.CLOSED.value}


def attribute_bytes(name: str, text: str) -> int:
    """What one attribute adds to the ``attrs`` map (names are ASCII)."""
    return len(name) + len(text.encode("utf-8")) + 1


def attributes_size(attrs: Mapping[str, str]) -> int:
    return EMPTY_MAP_BYTES + sum(attribute_bytes(k, v) for k, v in attrs.items())


class AttributesEdit:
    """``update_attributes``: set and remove entries of the ``attrs`` map on a session that is
    not closed, within ``ATTRIBUTES_MAX_BYTES``.

    The bound is kept without knowing the values being replaced: ``attrBytes`` is an *upper
    bound* of the map's size. An unpinned write adds the size of everything it writes and
    subtracts nothing (the value it replaces, or removes, is unknown to it); the condition
    ``attrBytes <= max - added`` keeps the bound, and so the map, under the limit. When the
    bound would refuse, the next attempt is pinned to the version of the item ALL_OLD showed
    and sets ``attrBytes`` to the exact size -- so the bound only ever refuses what really does
    not fit.
    """

    __slots__ = ("added", "changes", "remove", "session_id")

    def __init__(
        self, session_id: str, changes: dict[str, str], remove: tuple[str, ...], added: int
    ) -> None:
        self.session_id = session_id
        self.changes = changes
        self.remove = remove
        self.added = added

    def after(self, current: Session) -> dict[str, str]:
        """The attributes ``current`` would have after this edit (stored JSON text)."""
        out = {k: v for k, v in current.attributes.raw.items() if k not in self.remove}
        out.update(self.changes)
        return out

    def clauses(self, e: Expr, exact: Session | None) -> tuple[str, str, str]:
        e.names.update(_ATTRIBUTE_NAMES)
        attrs, counted = "#attrs", "#attrBytes"
        e.values[":closed"] = _CLOSED
        open_ = "#status <> :closed"
        if exact is not None and exact.attribute_bytes is None:
            # An item from before attributes: write the whole map and its exact size.
            new = self.after(exact)
            sets = f"{attrs} = {e.v(new)}, {counted} = {e.v(attributes_size(new))}"
            return sets, "", open_
        parts = [f"{attrs}.{e.k(name)} = {e.v(text)}" for name, text in self.changes.items()]
        removes = ", ".join([f"{attrs}.{e.k(name)}" for name in self.remove]) if self.remove else ""
        if exact is not None:
            parts.append(f"{counted} = {e.v(attributes_size(self.after(exact)))}")
            return ", ".join(parts), removes, open_
        e.values[":added"] = {"N": str(self.added)}
        e.values[":room"] = {"N": str(ATTRIBUTES_MAX_BYTES - self.added)}
        parts.append("#attrBytes = #attrBytes + :added")
        return ", ".join(parts), removes, f"{open_} AND #attrBytes <= :room"

    def judge(self, current: Session) -> Session | None:
        if current.status is Status.CLOSED:
            raise SessionNotActive(self.session_id, current.status)
        now = attributes_size(current.attributes.raw)
        new = attributes_size(self.after(current))
        if new > ATTRIBUTES_MAX_BYTES:
            raise ItemTooLarge(now, new - now, ATTRIBUTES_MAX_BYTES, what="attributes")
        return None

    def needs_exact(self, current: Session) -> bool:
        counted = current.attribute_bytes
        return counted is None or counted + self.added > ATTRIBUTES_MAX_BYTES

    def token_value(self, e: Expr, now_s: int) -> str:
        return ":nows"

    def ring_value(self, token: str, now_s: int) -> str:
        return token

    named_when_expected = False
