"""Session attributes: a small map of JSON values, in an item of its own beside the metadata item.

Layer: a pattern module, over ``locking`` (a change is also a write of the metadata item) and
``reads``; the attributes item's fields and its one parser are ``item.A`` and ``item.stored``.

A protocol version, client info, a title, counters: what a server wants to know about a session,
read with the session itself (``get_session`` reads them beside it). Names match
``[A-Za-z][A-Za-z0-9_.-]{0,63}`` and are never the store's own fields; values are kept as their
exact JSON text; the whole map takes at most ``ATTRIBUTES_MAX_BYTES``.

Why not on the metadata item: every tool call's claim, every append and every transition writes
that item, and DynamoDB bills a write by the item's whole size (twice in a transaction): 4 KiB
there made a fresh tool call cost 13 write units instead of 5. Here only a change pays for them.

=============  ==============================================================================
attribute      holds
=============  ==============================================================================
``pk``, ``sk``  ``session#<id>``, ``metadata#attributes`` (``schema.ATTRS_SK``)
``incarnation``  the session's: an item left by an earlier session under the id is not these
``rev``        how many changes made it; the metadata item's ``attrsRev`` is the same number
``attrBytes``  an upper bound of the attributes' size
``ttl``        the session's
*each name*    its JSON text (the reserved names keep the two apart)
=============  ==============================================================================

A change (``AttributesWrite``) is one ``TransactWriteItems``: the metadata write every change
makes (``locking.MetadataWrite``; here: not closed, ``attrsRev + 1``) and the change to this
item. Unless ``expected_version`` pins the version, it goes last writer wins per name: ``SET`` /
``REMOVE`` of top-level attributes (so the same update creates the item), and ``attrBytes``
grows by the size of what it writes (a bound: the values replaced are unknown) on the condition
that it stays under the limit. When that is refused (the bound is too pessimistic, or the item
is an earlier session's), the next attempt puts the whole map computed from the item the refusal
returned, with ``attrBytes`` exact, on the condition that the item is still that one (its
``rev``): the bound only ever refuses what really does not fit. A transaction returns nothing,
and ``update`` reads nothing back: one request per change. A caller who wants the session reads
it (``reads.attach`` serves the attributes from this instance's copy while it is current:
after a change, once a metadata item shows that change made its ``rev``, see ``memory``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from . import codec, locking, reads, schema, validate, write_tokens
from .conditions import (
    Clause,
    Condition,
    Name,
    Update,
    Value,
    absent,
    clause,
    equals,
    item_to_wire,
    put_item,
    remove,
    set_,
    update_item,
)
from .errors import DynamoDBError, InvalidInput, ItemTooLarge, SessionNotActive, SessionStoreError
from .item import ATTRIBUTES_MAX_BYTES as ATTRIBUTES_MAX_BYTES  # its bound, here too
from .item import (
    EMPTY_MAP_BYTES,
    AttributesItem,
    Meta,
    attributes_item,
    attributes_size,
    owned,
    stored,
)
from .locking import MetadataWrite
from .models import Attributes, Session, Status, StoredAttributes
from .table import Again, Plan, Table
from .wire import Cancelled, ConditionFailed

__all__ = [
    "ATTRIBUTES_MAX_BYTES",
    "RESERVED_ATTRIBUTE_NAMES",
    "AttributesEdit",
    "AttributesWrite",
    "update",
]

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}\Z")
#: Names that would read like the store's own fields (on the item or on ``Session``), refused
#: whatever their case so that ``session.attributes["Status"]`` never passes for the status.
RESERVED_ATTRIBUTE_NAMES = frozenset(
    """pk sk sessionId session_id version status owner createdAt created_at updatedAt updated_at
    ttl context contextBytes messageCount message_count context_bytes incarnation attrs attributes
    attrBytes attribute_bytes tk write_tokens rev attrsRev attributes_rev""".lower().split()
)


def validate_name(name: object) -> None:
    if not isinstance(name, str) or _NAME.match(name) is None:
        raise InvalidInput(
            f"attribute names must match [A-Za-z][A-Za-z0-9_.-]{{0,63}}, got {name!r:.80}"
        )
    if name.lower() in RESERVED_ATTRIBUTE_NAMES:
        raise InvalidInput(f"attribute name {name!r} is one of the store's own fields")


def attribute_texts(values: object, what: str) -> tuple[dict[str, str], int]:
    """Validated names -> exact JSON text of each value, and the bytes they add to the map;
    ``ItemTooLarge`` if they could never fit, whatever they replace."""
    if not isinstance(values, Mapping):
        raise InvalidInput(f"{what} must be a mapping of attribute names to JSON values")
    texts: dict[str, str] = {}
    for name, value in values.items():
        validate_name(name)
        texts[name] = codec.encode(value, f"{what}[{name!r}]")
    added = attributes_size(texts) - EMPTY_MAP_BYTES
    if EMPTY_MAP_BYTES + added > ATTRIBUTES_MAX_BYTES:
        raise ItemTooLarge(EMPTY_MAP_BYTES, added, ATTRIBUTES_MAX_BYTES, what="attributes")
    return texts, added


@dataclass(frozen=True, slots=True)
class AttributesEdit:
    """The metadata side of a change (an ``Edit`` for ``locking.MetadataWrite``): the session is
    not closed and is the incarnation the change was built for; ``attrsRev`` moves with the
    attributes item's ``rev``."""

    session_id: str
    changes: dict[str, str]
    remove: tuple[str, ...]
    added: int
    incarnation: str

    def update(self) -> Update:
        rev = Name(Meta.ATTRS_REV)
        return set_("attrs_rev_up", "{} = {} + {}", rev, rev, Value(1))

    def condition(self) -> Condition:
        not_closed = clause("not_closed", "{} <> {}", Name(Meta.STATUS), Value(Status.CLOSED.value))
        return not_closed & equals(Meta.INCARNATION, self.incarnation)

    def token_value(self, now_s: int) -> Clause:
        return write_tokens.stamp(now_s)

    def judge(self, current: Session) -> Session | None:
        if current.status is Status.CLOSED:
            raise SessionNotActive(self.session_id, current.status)
        return None


class Changed(NamedTuple):
    """A landed change: the tokens it removed, and the item it put whole (None: by name, or a
    lost response settled, where which attempt landed is unknown: ``whole`` is None, ``seen``
    False)."""

    removed: tuple[str, ...]
    whole: dict[str, Any] | None = None
    seen: bool = True


@dataclass(frozen=True, slots=True)
class AttributesWrite(Plan[Changed]):
    """The metadata write (``meta``, carrying an ``AttributesEdit``) and the change to the
    attributes item, in one transaction (the module docstring). ``ttl``: the session's, for an
    item put whole."""

    meta: MetadataWrite
    ttl: int
    whole: dict[str, Any] | None = None  # the item to put instead of the by-name update
    whole_rev: int | None = None  # the rev the item must still have (None: no item)

    operation: ClassVar[str] = "transact_write_items"

    @property
    def edit(self) -> AttributesEdit:
        assert isinstance(self.meta.edit, AttributesEdit)
        return self.meta.edit

    def put_whole(self, current: StoredAttributes | None) -> AttributesWrite:
        """This write, putting the whole map computed from ``current`` (None: no item yet for
        this session), on the condition that the item is still that one."""
        edit = self.edit
        if current is not None and current.incarnation != edit.incarnation:
            current = None  # an earlier session's: replaced whole
        raw = current.attributes.raw if current is not None else {}
        after = {k: v for k, v in raw.items() if k not in edit.remove} | edit.changes
        size = attributes_size(after)
        if size > ATTRIBUTES_MAX_BYTES:
            now = attributes_size(raw)
            raise ItemTooLarge(now, size - now, ATTRIBUTES_MAX_BYTES, what="attributes")
        rev = 0 if current is None else current.rev
        whole = attributes_item(edit.session_id, edit.incarnation, rev + 1, after, self.ttl)
        return dataclasses.replace(
            self, whole=whole, whole_rev=None if current is None else current.rev
        )

    def request(self, now_ms: int) -> dict[str, Any]:
        return {"TransactItems": [self.meta.transaction_action(now_ms), self._attributes_action()]}

    def _attributes_action(self) -> dict[str, Any]:
        edit, table = self.edit, self.meta.table
        ours = equals(AttributesItem.INCARNATION, edit.incarnation)
        if self.whole is not None:
            # Still the item the whole map was computed from.
            if self.whole_rev is None:
                unchanged = absent(AttributesItem.PK) | ~ours
            else:
                unchanged = equals(AttributesItem.REV, self.whole_rev)
            return {"Put": put_item(table, item_to_wire(self.whole), unchanged)}
        counted, rev = Name(AttributesItem.BYTES), Name(AttributesItem.REV)
        update = Update()
        for name, text in edit.changes.items():
            update += set_("attribute", "{} = {}", Name(name, free=True), Value(text))
        update += set_(
            "bytes_grow",
            "{} = if_not_exists({}, {}) + {}",
            counted,
            counted,
            Value(EMPTY_MAP_BYTES),
            Value(edit.added),
        )
        update += set_("rev_up", "{} = if_not_exists({}, {}) + {}", rev, rev, Value(0), Value(1))
        update += set_(
            "incarnation", "{} = {}", Name(AttributesItem.INCARNATION), Value(edit.incarnation)
        )
        update += set_("ttl", "{} = {}", Name(AttributesItem.TTL), Value(self.ttl))
        if edit.remove:
            update += remove(*(Name(name, free=True) for name in edit.remove))
        # None yet (this update creates it), or this session's with room for what this write
        # adds, whatever it replaces.
        room = clause("room", "{} <= {}", counted, Value(ATTRIBUTES_MAX_BYTES - edit.added))
        condition = absent(AttributesItem.PK) | (ours & room)
        key = schema.attrs_key(edit.session_id)
        return {"Update": update_item(table, key, update, condition, returns=None)}

    def succeeded(self, response: dict[str, Any], now_ms: int) -> Changed:
        return Changed(self.meta.removed(now_ms // 1000), self.whole)

    def refused(
        self, failure: ConditionFailed | Cancelled, now_ms: int
    ) -> Changed | Again[Changed]:
        assert isinstance(failure, Cancelled)
        if failure.failed(0):
            old = failure.old(0)
            if (
                old is not None
                and owned(old, self.meta.owner)
                and old.get(Meta.INCARNATION) != self.edit.incarnation
            ):
                # The session was created again since this change was built: change that one.
                edit = dataclasses.replace(self.edit, incarnation=str(old[Meta.INCARNATION]))
                meta = dataclasses.replace(self.meta, edit=edit)
                return Again(AttributesWrite(meta, int(old[Meta.TTL])))
            verdict = self.meta.refused_first(failure, now_ms)
            if isinstance(verdict, MetadataWrite):
                return Again(dataclasses.replace(self, meta=verdict))
            return Changed((), seen=False)
        if failure.failed(1):
            return Again(self.put_whole(stored(failure.old(1))))
        raise DynamoDBError("TransactionCanceledException", repr(failure.reasons))

    def exhausted(self, what: str, attempts: int) -> SessionStoreError:
        if self.meta.current is None:  # refused on the attributes item only, by rival changes
            return Plan.exhausted(self, what, attempts)
        return self.meta.exhausted(what, attempts)


def changes_of(
    changes: Mapping[str, object], remove: Sequence[str]
) -> tuple[dict[str, str], tuple[str, ...], int]:
    """Validated: the JSON texts to set, the names to remove, and the bytes the texts add."""
    texts, added = attribute_texts(changes, "changes")
    if isinstance(remove, str | bytes) or not isinstance(remove, Sequence):
        raise InvalidInput("remove must be a sequence of attribute names")
    for name in remove:
        validate_name(name)
    gone = tuple(dict.fromkeys(remove))
    if not texts and not gone:
        raise InvalidInput("changes or remove must name at least one attribute")
    both = set(texts).intersection(gone)
    if both:
        raise InvalidInput(f"attributes both changed and removed: {sorted(both)}")
    return texts, gone, added


def update(
    table: Table,
    session_id: str,
    changes: Mapping[str, object],
    remove: Sequence[str],
    expected_version: int | None,
    owner: str | None,
) -> None:
    """Set ``changes`` and delete the names in ``remove``: one transaction, nothing read back
    (an instance that has not seen the session reads it first, for its incarnation and ttl)."""
    validate.expected_version(expected_version)
    texts, gone, added = changes_of(changes, remove)
    now_s = table.now_ms() // 1000
    seen = table.memory.hint(session_id, owner, now_s) or reads.read(table, session_id, owner)
    edit = AttributesEdit(session_id, texts, gone, added, seen.incarnation)
    base = _copy(table, seen)
    if base is None:  # an earlier change's guess, if any, will not be confirmed: its token is dead
        table.memory.forget_guess(session_id)
    token = table.token()
    meta = locking.planned(
        table, session_id, owner, edit, token, version=expected_version, expected=True, seen=seen
    )
    try:
        # The conflict carries the session with its attributes, after remembering it bare.
        with reads.on_conflict(table), table.memory.refusals():
            plan = AttributesWrite(meta, seen.ttl)
            changed = table.drive(plan, f"write to session {session_id!r}")
    except BaseException:
        table.memory.settle(session_id, token, ())
        raise
    # This instance's copy, without reading: a guess (``Memory.guess``), exact whenever the
    # session's ``attrsRev`` turns out to be its ``rev`` -- one change since ``base``, and that
    # change was this one.
    guessed = False
    if changed.whole is not None:
        table.memory.keep_attributes(session_id, stored(changed.whole))
    elif changed.seen and base is not None:
        raw = {k: v for k, v in base.attributes.raw.items() if k not in gone} | texts
        after = StoredAttributes(
            base.incarnation, base.rev + 1, Attributes(raw), base.bytes + added
        )
        guessed = table.memory.guess(session_id, after, base, token)
    table.memory.settle(session_id, token, changed.removed, dead=not guessed)


def _copy(table: Table, seen: Session) -> StoredAttributes | None:
    """The attributes as they were at ``seen`` (this instance's copy of that ``rev``, or none at
    all for a session that never had any), or None if this instance does not know them."""
    if seen.attributes_rev == 0:
        return StoredAttributes(seen.incarnation, 0, Attributes(), EMPTY_MAP_BYTES)
    copy = table.memory.current(seen)
    if copy is None or copy.rev != seen.attributes_rev:
        return None
    return copy
