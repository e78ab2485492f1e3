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

from collections.abc import Mapping
from typing import Any

from . import schema, sizing
from .clock import parse_timestamp
from .conditions import Condition, Field, Name, Update, Value, clause, item_to_wire, set_
from .errors import DynamoDBError, SessionExpired, SessionNotFound
from .ids import MAX_ID_LENGTH, MAX_TOKEN_LENGTH
from .models import Attributes, Session, Status, StoredAttributes
from .write_tokens import KEY_LENGTH, SEQ_SPAN, TOKEN_CAP, key

__all__ = [
    "ATTRIBUTES_MAX_BYTES",
    "IDLE_SKEW_S",
    "METADATA_OVERHEAD",
    "AttributesItem",
    "Meta",
    "alive",
    "idle_moved",
    "live",
    "owned",
    "session_from_item",
]


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


_STATUS = {s.value: s for s in Status}
_FIELDS = frozenset(Meta) - {Meta.PK, Meta.SK, Meta.OWNER, Meta.IDLE_FROM}


def session_from_item(
    item: Mapping[str, Any], attributes: Attributes | None = None, attribute_bytes: int = 0
) -> Session:
    """The metadata item (python-typed, as ``wire.to_python`` gives it) as a ``Session``, with
    the attributes read beside it (``reads.attach``: none unless given);
    ``DynamoDBError`` for an item this store did not write (a field missing)."""
    missing = _FIELDS.difference(item)
    if missing:
        raise DynamoDBError(
            "UnexpectedItem",
            f"metadata item {item.get(Meta.PK)!r} lacks {sorted(missing)}: "
            "not written by this store",
        )
    ttl = int(item[Meta.TTL])
    idle = int(item[Meta.IDLE])
    created_s = parse_timestamp(item[Meta.CREATED_AT]) // 1000
    return Session(
        session_id=item[Meta.SESSION_ID],
        version=int(item[Meta.VERSION]),
        status=_STATUS[item[Meta.STATUS]],
        owner=item.get(Meta.OWNER),
        created_at=item[Meta.CREATED_AT],
        updated_at=item[Meta.UPDATED_AT],
        ttl=ttl,
        message_count=int(item[Meta.MESSAGE_COUNT]),
        context_bytes=int(item[Meta.CONTEXT_BYTES]),
        incarnation=item[Meta.INCARNATION],
        attributes=attributes if attributes is not None else Attributes(),
        attribute_bytes=attribute_bytes,
        write_tokens={k: int(v) for k, v in item[Meta.TOKENS].items()},
        attributes_rev=int(item[Meta.ATTRS_REV]),
        # An idle period as long as the whole ttl can never end the session first: fixed.
        idle_seconds=idle if idle < ttl - created_s else None,
        idle_until=int(item[Meta.IDLE_UNTIL]),
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
        Meta.PK: schema.pk(session_id),
        Meta.SK: schema.META_SK,
        Meta.SESSION_ID: session_id,
        Meta.VERSION: 1,
        Meta.STATUS: Status.INITIALIZING.value,
        Meta.CREATED_AT: stamp,
        Meta.UPDATED_AT: stamp,
        Meta.TTL: ttl,
        Meta.IDLE: idle,
        Meta.IDLE_UNTIL: idle_until,
        Meta.IDLE_FROM: parse_timestamp(stamp) // 1000,
        Meta.INCARNATION: token,
        Meta.MESSAGE_COUNT: 0,
        Meta.CONTEXT_BYTES: 0,
        Meta.ATTRS_REV: attrs_rev,
        Meta.TOKENS: {key(token): token_value},
    }
    if owner is not None:
        item[Meta.OWNER] = owner
    return item


def owned(item: Mapping[str, Any], owner: str | None) -> bool:
    return item.get(Meta.OWNER) == owner


# ---------------------------------------------------------------------------- its guards


def owned_by(owner: str | None) -> Condition:
    """The item belongs to ``owner`` (None: to nobody)."""
    if owner is None:
        return clause("unowned", "attribute_not_exists({})", Name(Meta.OWNER))
    return clause("owned_by", "{} = {}", Name(Meta.OWNER), Value(owner))


def alive(owner: str | None, now_s: int) -> Condition:
    """The session item exists, has not expired -- neither its cap ``ttl`` nor its idle
    deadline ``idleUntil`` has passed -- and belongs to ``owner``."""
    return (
        clause("exists", "attribute_exists({})", Name(Meta.PK))
        & clause("before_ttl", "{} > {}", Name(Meta.TTL), Value(now_s))
        & clause("not_idle", "{} > {}", Name(Meta.IDLE_UNTIL), Value(now_s))
        & owned_by(owner)
    )


def idle_moved(now_s: int) -> tuple[Update, Condition]:
    """The update that moves the idle deadline on -- ``idleUntil = idle + :now``, so the writer
    needs to know neither the idle period nor the cap, and ``idleFrom = :now``, the time it
    counts from -- and the condition that keeps it from moving back. The deadline may pass
    ``ttl``: readers take the earlier (``Session.expires_at``). A fixed-ttl session's ``idle``
    is its whole ttl, so one formula serves both.

    A writer whose clock lags behind the last one's by more than ``IDLE_SKEW_S``
    (``idleFrom`` later than its ``:now`` plus that) is refused, and sends its write again
    without moving the deadline (``idle_ahead``). Within it the deadline may move back by up to
    that second: writers on one clock read it at T.999 and T+1.000 and land in either order
    (under load a request waits in the queue), and neither is refused for it."""
    now = Value(now_s)
    update = set_("idle_until", "{} = {} + {}", Name(Meta.IDLE_UNTIL), Name(Meta.IDLE), now) + set_(
        "idle_from", "{} = {}", Name(Meta.IDLE_FROM), now
    )
    latest = Value(now_s + IDLE_SKEW_S)
    return update, ~clause("idle_from_later", "{} > {}", Name(Meta.IDLE_FROM), latest)


#: How far (seconds) ``idleFrom`` may be past a writer's clock and the writer still moves the
#: deadline (``idle_moved``): whole seconds read on one clock by writers in flight together.
IDLE_SKEW_S = 1


def idle_ahead(item: Mapping[str, Any] | None, now_s: int) -> bool:
    """The item's idle deadline counts from later than ``now_s`` by more than ``IDLE_SKEW_S``:
    moving it would shorten it more than writers on one clock may."""
    return item is not None and int(item.get(Meta.IDLE_FROM, 0)) > now_s + IDLE_SKEW_S


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


class AttributesItem(Field):
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
        AttributesItem.PK: schema.pk(session_id),
        AttributesItem.SK: schema.ATTRS_SK,
        AttributesItem.INCARNATION: incarnation,
        AttributesItem.REV: rev,
        AttributesItem.BYTES: attributes_size(attrs),
        AttributesItem.TTL: ttl,
    }


def stored(item: Mapping[str, Any] | None) -> StoredAttributes | None:
    """The attributes item (python-typed) as ``StoredAttributes``; None for no item."""
    if item is None:
        return None
    return StoredAttributes(
        item[AttributesItem.INCARNATION],
        int(item[AttributesItem.REV]),
        Attributes({k: v for k, v in item.items() if k not in frozenset(AttributesItem)}),
        int(item[AttributesItem.BYTES]),
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
