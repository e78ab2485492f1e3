"""The session's metadata item: its fields, its one parser, and the bound of its size.

Every write of the session -- a tool call's claim, an append's reservation, a transition --
writes this item and is billed by its whole size, so it holds only what those writes need; the
attributes are in an item of their own (``attributes``).

================  ========================================================================
attribute         holds
================  ========================================================================
``pk``, ``sk``    ``session#<id>``, ``metadata`` (``schema``)
``sessionId``     the id
``version``       goes up by one with every write (``locking``)
``status``        ``initializing`` / ``active`` / ``closing`` / ``closed`` (``lifecycle``)
``owner``         the principal it belongs to; absent for an unowned session
``createdAt``     ISO-8601 UTC, milliseconds; ``updatedAt`` likewise, moved by every write
``ttl``           epoch seconds: the session's absolute cap; DynamoDB's TTL deletes the item
                  (late) after it, and every page and tool-call item carries the same
``idle``          seconds without a write after which the session expires (its whole ttl
                  for a fixed-ttl session: one formula serves both)
``idleUntil``     epoch seconds: ``idle`` after the last write (``item.idle_moved``);
                  may pass ``ttl``, the earlier of the two is when the session expires
``idleFrom``      epoch seconds: when the last write moved ``idleUntil`` on (by its clock); a
                  write never moves the deadline back from there
``incarnation``   unique per creation: tells a session from an earlier one under the same id
``messageCount``  seqs reserved for the context (``context``)
``contextBytes``  the bytes of the messages appended
``attrsRev``      how many times the attributes changed: equal to the attributes item's ``rev``
                  (both move in one transaction; ``attributes``), 0 if it never had any
``tk``            request tokens of recent writes (``write_tokens``)
================  ========================================================================
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

from . import schema, sizing
from .clock import parse_timestamp
from .conditions import (
    Bound,
    Condition,
    Field,
    Name,
    Update,
    Value,
    all_of,
    clause,
    item_to_wire,
    set_,
)
from .errors import DynamoDBError, SessionExpired, SessionNotFound
from .ids import MAX_ID_LENGTH, MAX_TOKEN_LENGTH
from .models import Attributes, Session, Status, StoredAttributes
from .write_tokens import KEY_LENGTH, SEQ_SPAN, TOKEN_CAP, key


class Meta(Field):
    """The metadata item's attributes (the table above)."""

    PK = "pk"
    SK = "sk"
    SESSION_ID = "sessionId"
    VERSION = "version"
    STATUS = "status"
    OWNER = "owner"
    CREATED_AT = "createdAt"
    UPDATED_AT = "updatedAt"
    TTL = "ttl"
    IDLE = "idle"
    IDLE_UNTIL = "idleUntil"
    IDLE_FROM = "idleFrom"
    INCARNATION = "incarnation"
    MESSAGE_COUNT = "messageCount"
    CONTEXT_BYTES = "contextBytes"
    ATTRS_REV = "attrsRev"
    TOKENS = "tk"


M = Meta  # short, for the clauses below and the pattern modules'

_STATUS = {s.value: s for s in Status}
_FIELDS = frozenset(m.value for m in Meta) - {M.PK, M.SK, M.OWNER, M.IDLE_FROM}
#: The fields ``session_from_item`` reads, in one call and by their plain texts (a dict finds a
#: StrEnum member more slowly than the str it equals; every write reads back the item it left).
_READ = operator.itemgetter(
    *(
        m.value
        for m in (
            M.SESSION_ID,
            M.VERSION,
            M.STATUS,
            M.CREATED_AT,
            M.UPDATED_AT,
            M.TTL,
            M.IDLE,
            M.IDLE_UNTIL,
            M.INCARNATION,
            M.MESSAGE_COUNT,
            M.CONTEXT_BYTES,
            M.TOKENS,
            M.ATTRS_REV,
        )
    )
)
#: The last creation time parsed (text, epoch seconds): a session's is the same in every write.
_CREATED: tuple[str, int] = ("", 0)


def _created_s(text: str) -> int:
    global _CREATED
    last = _CREATED  # one tuple, replaced whole: safe to share between threads
    if last[0] != text:
        last = _CREATED = (text, parse_timestamp(text) // 1000)
    return last[1]


def session_from_item(
    item: Mapping[str, Any], attributes: Attributes | None = None, attribute_bytes: int = 0
) -> Session:
    """The metadata item (python-typed, as ``wire.to_python`` gives it) as a ``Session``, with
    the attributes read beside it (``reads.attach``: none unless given);
    ``DynamoDBError`` for an item this store did not write (a field missing)."""
    if not item.keys() >= _FIELDS:
        raise DynamoDBError(
            "UnexpectedItem",
            f"metadata item {item.get(M.PK)!r} lacks {sorted(_FIELDS.difference(item))}: "
            "not written by this store",
        )
    (
        session_id,
        version,
        status,
        created_at,
        updated_at,
        ttl,
        idle,
        idle_until,
        incarnation,
        count,
        size,
        tokens,
        rev,
    ) = _READ(item)
    ttl, idle = int(ttl), int(idle)
    return Session(
        session_id=session_id,
        version=int(version),
        status=_STATUS[status],
        owner=item.get(M.OWNER),
        created_at=created_at,
        updated_at=updated_at,
        ttl=ttl,
        message_count=int(count),
        context_bytes=int(size),
        incarnation=incarnation,
        attributes=attributes if attributes is not None else Attributes(),
        attribute_bytes=attribute_bytes,
        write_tokens={k: int(v) for k, v in tokens.items()},
        attributes_rev=int(rev),
        # An idle period as long as the whole ttl can never end the session first: fixed.
        idle_seconds=idle if idle < ttl - _created_s(created_at) else None,
        idle_until=int(idle_until),
    )


def new_item(
    session_id: str,
    owner: str | None,
    stamp: str,
    ttl: int,
    token: str,
    token_value: int,
    attrs_rev: int,
    idle: int,
    idle_until: int,
) -> dict[str, Any]:
    """A new session's metadata item (python-typed). Its incarnation is the create's token,
    which it also names in ``tk`` like every write. ``idle`` / ``idle_until``: the idle period
    and the first idle deadline (a fixed-ttl session: its ttl in seconds, and the cap), which
    counts from its creation (``idleFrom``)."""
    item: dict[str, Any] = {
        M.PK: schema.pk(session_id),
        M.SK: schema.META_SK,
        M.SESSION_ID: session_id,
        M.VERSION: 1,
        M.STATUS: Status.INITIALIZING.value,
        M.CREATED_AT: stamp,
        M.UPDATED_AT: stamp,
        M.TTL: ttl,
        M.IDLE: idle,
        M.IDLE_UNTIL: idle_until,
        M.IDLE_FROM: parse_timestamp(stamp) // 1000,
        M.INCARNATION: token,
        M.MESSAGE_COUNT: 0,
        M.CONTEXT_BYTES: 0,
        M.ATTRS_REV: attrs_rev,
        M.TOKENS: {key(token): token_value},
    }
    if owner is not None:
        item[M.OWNER] = owner
    return item


def owned(item: Mapping[str, Any], owner: str | None) -> bool:
    return item.get(M.OWNER) == owner


# ---------------------------------------------------------------------------- its guards


# Built once; a request puts its values in them (``conditions.Bound``).
_UNOWNED = clause("unowned", "attribute_not_exists({})", Name(M.OWNER))
_OWNED_BY = clause("owned_by", "{} = {}", Name(M.OWNER), Value(""))
_ALIVE = all_of(
    clause("exists", "attribute_exists({})", Name(M.PK)),
    clause("before_ttl", "{} > {}", Name(M.TTL), Value(0)),
    clause("not_idle", "{} > {}", Name(M.IDLE_UNTIL), Value(0)),
)
_ALIVE_UNOWNED = all_of(_ALIVE, _UNOWNED)
_ALIVE_OWNED = all_of(_ALIVE, _OWNED_BY)
_IDLE_MOVED = set_("idle_until", "{} = {} + {}", Name(M.IDLE_UNTIL), Name(M.IDLE), Value(0)) + set_(
    "idle_from", "{} = {}", Name(M.IDLE_FROM), Value(0)
)
_NOT_BACK = ~clause("idle_from_later", "{} > {}", Name(M.IDLE_FROM), Value(0))


def owned_by(owner: str | None) -> Condition:
    """The item belongs to ``owner`` (None: to nobody)."""
    return _UNOWNED if owner is None else Bound(_OWNED_BY, (owner,)).build()


def alive(owner: str | None, now_s: int) -> Condition:
    """The session item exists, has not expired -- neither its cap ``ttl`` nor its idle
    deadline ``idleUntil`` has passed -- and belongs to ``owner``."""
    return alive_bound(owner, now_s).build()


def alive_bound(owner: str | None, now_s: int) -> Bound[Condition]:
    """``alive``, as a write sends it."""
    if owner is None:
        return Bound(_ALIVE_UNOWNED, (now_s, now_s))
    return Bound(_ALIVE_OWNED, (now_s, now_s, owner))


def idle_moved(now_s: int) -> tuple[Update, Condition]:
    """The update that moves the idle deadline on -- ``idleUntil = idle + :now``, so the writer
    needs to know neither the idle period nor the cap, and ``idleFrom = :now``, the time it
    counts from -- and the condition that keeps it from moving back. The deadline may pass
    ``ttl``: readers take the earlier (``Session.expires_at``). A fixed-ttl session's ``idle``
    is its whole ttl, so one formula serves both.

    A writer whose clock lags behind the last one's (``idleFrom`` later than its ``:now``) is
    refused, and sends its write again without moving the deadline (``idle_ahead``). Clocks a
    second apart rarely meet it."""
    moved, not_back = idle_moved_bound(now_s)
    return moved.build(), not_back.build()


def idle_moved_bound(now_s: int) -> tuple[Bound[Update], Bound[Condition]]:
    """``idle_moved``, as a write sends it."""
    return Bound(_IDLE_MOVED, (now_s, now_s)), Bound(_NOT_BACK, (now_s,))


def idle_ahead(item: Mapping[str, Any] | None, now_s: int) -> bool:
    """The item's idle deadline counts from later than ``now_s``: moving it would shorten it."""
    return item is not None and int(item.get(M.IDLE_FROM, 0)) > now_s


def live(session_id: str, item: Mapping[str, Any] | None, owner: str | None, now_s: int) -> Session:
    """The item as a Session, or the error that explains why there is none. Another owner's
    session looks exactly like a missing one."""
    if item is None or not owned(item, owner):
        raise SessionNotFound(session_id)
    session = session_from_item(item)
    if session.expires_at <= now_s:  # past the cap, or idle past its timeout: the same refusal
        raise SessionExpired(session_id, session.expires_at)
    return session


# ---------------------------------------------------------------------------- the attributes item
#
# Beside the metadata item (``schema.ATTRS_SK``): the session's attributes, one attribute each
# (the reserved names keep them apart from these fields), changed by ``attributes``.


class A(Field):
    """The attributes item's own fields (``attributes``' table); every other is a name."""

    PK = "pk"
    SK = "sk"
    INCARNATION = "incarnation"
    REV = "rev"
    BYTES = "attrBytes"
    TTL = "ttl"


#: The most bytes a session's attributes may take, sized as a map by DynamoDB's rules (3 + per
#: attribute its name, its JSON text and 1): a little more than they take in their item.
ATTRIBUTES_MAX_BYTES = 4096
EMPTY_MAP_BYTES = 3


def attributes_size(attrs: Mapping[str, str]) -> int:
    """The size of the map of names to JSON texts (names are ASCII)."""
    return EMPTY_MAP_BYTES + sum(len(k) + len(v.encode("utf-8")) + 1 for k, v in attrs.items())


def attributes_item(
    session_id: str, incarnation: str, rev: int, attrs: Mapping[str, str], ttl: int
) -> dict[str, Any]:
    """The attributes item holding exactly ``attrs`` (python-typed)."""
    return {
        **attrs,
        A.PK: schema.pk(session_id),
        A.SK: schema.ATTRS_SK,
        A.INCARNATION: incarnation,
        A.REV: rev,
        A.BYTES: attributes_size(attrs),
        A.TTL: ttl,
    }


def stored(item: Mapping[str, Any] | None) -> StoredAttributes | None:
    """The attributes item (python-typed) as ``StoredAttributes``; None for no item."""
    if item is None:
        return None
    return StoredAttributes(
        item[A.INCARNATION],
        int(item[A.REV]),
        Attributes({k: v for k, v in item.items() if k not in frozenset(A)}),
        int(item[A.BYTES]),
    )


#: The widest numbers the item can hold: DynamoDB sizes a number by its significant digits, so
#: the bound uses all-nines, not powers of ten (10**20 is 2 bytes, 9...9 is 11).
WIDEST_TTL = int("9" * 11)  # epoch seconds past the year 5000
WIDEST_COUNT = SEQ_SPAN - 1  # more messages than any limit allows
WIDEST_CONTEXT_BYTES = int("9" * 15)


def _max_size() -> int:
    widest = new_item(
        "x" * MAX_ID_LENGTH,
        "x" * MAX_ID_LENGTH,
        "9999-12-31T23:59:59.999Z",  # timestamps are always 24 characters
        WIDEST_TTL,
        "x" * MAX_TOKEN_LENGTH,
        0,
        int("9" * 20),
        WIDEST_TTL,
        WIDEST_TTL,
    )
    widest.update(
        version=int("9" * 20),
        status=max((s.value for s in Status), key=len),
        messageCount=WIDEST_COUNT,
        contextBytes=WIDEST_CONTEXT_BYTES,
        idleFrom=WIDEST_TTL,
        tk={
            f"{i:03d}".rjust(KEY_LENGTH, "x"): WIDEST_TTL * SEQ_SPAN + WIDEST_COUNT
            for i in range(TOKEN_CAP)
        },
    )
    return sizing.item_size(item_to_wire(widest))


#: The most bytes a metadata item can take, whatever the session holds: its messages are in
#: page items, so this bounds what every write to it is billed, however long the session.
METADATA_OVERHEAD = _max_size()
