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
``idleUntil``     epoch seconds: ``idle`` after the last write (``expressions.extend_idle``);
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
from .errors import DynamoDBError, SessionExpired, SessionNotFound
from .ids import MAX_ID_LENGTH, MAX_TOKEN_LENGTH
from .lifecycle import Status
from .models import Attributes, Session
from .wire import item_to_wire
from .write_tokens import KEY_LENGTH, SEQ_SPAN, TOKEN_CAP, key

_STATUS = {s.value: s for s in Status}
_FIELDS = frozenset(
    {"sessionId", "version", "status", "createdAt", "updatedAt", "ttl", "incarnation"}
    | {"idle", "idleUntil", "messageCount", "contextBytes", "attrsRev", "tk"}
)


def session_from_item(
    item: Mapping[str, Any], attributes: Attributes | None = None, attribute_bytes: int = 0
) -> Session:
    """The metadata item (python-typed, as ``wire.to_python`` gives it) as a ``Session``, with
    the attributes read beside it (``attributes.attach``: none unless given);
    ``DynamoDBError`` for an item this store did not write (a field missing)."""
    missing = _FIELDS.difference(item)
    if missing:
        raise DynamoDBError(
            "UnexpectedItem",
            f"metadata item {item.get('pk')!r} lacks {sorted(missing)}: not written by this store",
        )
    ttl = int(item["ttl"])
    idle = int(item["idle"])
    created_s = parse_timestamp(item["createdAt"]) // 1000
    return Session(
        session_id=item["sessionId"],
        version=int(item["version"]),
        status=_STATUS[item["status"]],
        owner=item.get("owner"),
        created_at=item["createdAt"],
        updated_at=item["updatedAt"],
        ttl=ttl,
        message_count=int(item["messageCount"]),
        context_bytes=int(item["contextBytes"]),
        incarnation=item["incarnation"],
        attributes=attributes if attributes is not None else Attributes(),
        attribute_bytes=attribute_bytes,
        write_tokens={k: int(v) for k, v in item["tk"].items()},
        attributes_rev=int(item["attrsRev"]),
        # An idle period as long as the whole ttl can never end the session first: fixed.
        idle_seconds=idle if idle < ttl - created_s else None,
        idle_until=int(item["idleUntil"]),
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
        "pk": schema.pk(session_id),
        "sk": schema.META_SK,
        "sessionId": session_id,
        "version": 1,
        "status": Status.INITIALIZING.value,
        "createdAt": stamp,
        "updatedAt": stamp,
        "ttl": ttl,
        "idle": idle,
        "idleUntil": idle_until,
        "idleFrom": parse_timestamp(stamp) // 1000,
        "incarnation": token,
        "messageCount": 0,
        "contextBytes": 0,
        "attrsRev": attrs_rev,
        "tk": {key(token): token_value},
    }
    if owner is not None:
        item["owner"] = owner
    return item


def owned(item: Mapping[str, Any], owner: str | None) -> bool:
    return item.get("owner") == owner


def live(session_id: str, item: Mapping[str, Any] | None, owner: str | None, now_s: int) -> Session:
    """The item as a Session, or the error that explains why there is none. Another owner's
    session looks exactly like a missing one."""
    if item is None or not owned(item, owner):
        raise SessionNotFound(session_id)
    session = session_from_item(item)
    if session.expires_at <= now_s:  # past the cap, or idle past its timeout: the same refusal
        raise SessionExpired(session_id, session.expires_at)
    return session


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
