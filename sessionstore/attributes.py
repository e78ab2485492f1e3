"""Session attributes: a small map of JSON values, in an item of its own beside the metadata item.

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
``rev``): the bound only ever refuses what really does not fit. A transaction returns nothing:
the store reads the session back (one Query of both items).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import codec, schema
from .attempts import RETRY, Retry, gave_up
from .errors import DynamoDBError, InvalidInput, ItemTooLarge, SessionNotActive, SessionStoreError
from .expressions import Expr
from .item import owned
from .lifecycle import Status
from .models import Attributes
from .wire import Cancelled, ConditionFailed, item_to_wire

if TYPE_CHECKING:
    from .locking import MetadataWrite
    from .models import Session

#: The most bytes a session's attributes may take, sized as a map by DynamoDB's rules (3 + per
#: attribute its name, its JSON text and 1): a little more than they take in their item.
ATTRIBUTES_MAX_BYTES = 4096
EMPTY_MAP_BYTES = 3

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}\Z")
#: Names that would read like the store's own fields (on the item or on ``Session``), refused
#: whatever their case so that ``session.attributes["Status"]`` never passes for the status.
RESERVED_ATTRIBUTE_NAMES = frozenset(
    """pk sk sessionId session_id version status owner createdAt created_at updatedAt updated_at
    ttl context contextBytes messageCount message_count context_bytes incarnation attrs attributes
    attrBytes attribute_bytes tk write_tokens rev attrsRev attributes_rev""".lower().split()
)


def attributes_size(attrs: Mapping[str, str]) -> int:
    """The size of the map of names to JSON texts (names are ASCII)."""
    return EMPTY_MAP_BYTES + sum(len(k) + len(v.encode("utf-8")) + 1 for k, v in attrs.items())


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


def attributes_item(
    session_id: str, incarnation: str, rev: int, attrs: Mapping[str, str], ttl: int
) -> dict[str, Any]:
    """The attributes item holding exactly ``attrs`` (python-typed)."""
    return {
        **attrs,
        "pk": schema.pk(session_id),
        "sk": schema.ATTRS_SK,
        "incarnation": incarnation,
        "rev": rev,
        "attrBytes": attributes_size(attrs),
        "ttl": ttl,
    }


_ITEM_FIELDS = frozenset({"pk", "sk", "incarnation", "rev", "attrBytes", "ttl"})


@dataclass(frozen=True, slots=True)
class Stored:
    """The attributes as an attributes item holds them."""

    incarnation: str
    rev: int
    attributes: Attributes
    bytes: int


def stored(item: Mapping[str, Any] | None) -> Stored | None:
    """The attributes item (python-typed) as ``Stored``; None for no item."""
    if item is None:
        return None
    return Stored(
        item["incarnation"],
        int(item["rev"]),
        Attributes({k: v for k, v in item.items() if k not in _ITEM_FIELDS}),
        int(item["attrBytes"]),
    )


@dataclass(slots=True)
class AttributesEdit:
    """The metadata side of a change (an ``Edit`` for ``locking.MetadataWrite``): the session is
    not closed and is the incarnation the change was built for; ``attrsRev`` moves with the
    attributes item's ``rev``."""

    session_id: str
    changes: dict[str, str]
    remove: tuple[str, ...]
    added: int
    incarnation: str

    def clauses(self, e: Expr) -> tuple[str, str, str]:
        rev = e.n("attrsRev")
        condition = (
            f"{e.n('status')} <> {e.v(Status.CLOSED.value)}"
            f" AND {e.n('incarnation')} = {e.v(self.incarnation)}"
        )
        return f"{rev} = {rev} + {e.v(1)}", "", condition

    def token_value(self, e: Expr, now_s: int) -> str:
        return e.v(now_s)

    def judge(self, current: Session) -> Session | None:
        if current.status is Status.CLOSED:
            raise SessionNotActive(self.session_id, current.status)
        return None


@dataclass(slots=True)
class AttributesWrite:
    """``update_attributes``: the metadata write (``meta``, carrying an ``AttributesEdit``) and
    the change to the attributes item, in one transaction (the module docstring). ``ttl``: the
    session's, for an item put whole."""

    meta: MetadataWrite
    edit: AttributesEdit
    ttl: int
    whole: dict[str, Any] | None = None  # the item to put instead of the by-name update
    whole_rev: int | None = None  # the rev the item must still have (None: no item)

    operation = "transact_write_items"

    def put_whole(self, current: Stored | None) -> None:
        """Put the whole map the next time, computed from ``current`` (None: no item yet for
        this session), on the condition that the item is still that one."""
        if current is not None and current.incarnation != self.edit.incarnation:
            current = None  # an earlier session's: replaced whole
        raw = current.attributes.raw if current is not None else {}
        after = {k: v for k, v in raw.items() if k not in self.edit.remove} | self.edit.changes
        size = attributes_size(after)
        if size > ATTRIBUTES_MAX_BYTES:
            now = attributes_size(raw)
            raise ItemTooLarge(now, size - now, ATTRIBUTES_MAX_BYTES, what="attributes")
        self.whole_rev = None if current is None else current.rev
        rev = 0 if current is None else current.rev
        self.whole = attributes_item(
            self.edit.session_id, self.edit.incarnation, rev + 1, after, self.ttl
        )

    def request(self, now_ms: int) -> dict[str, Any]:
        meta = self.meta.request(now_ms)
        del meta["ReturnValues"]
        return {"TransactItems": [{"Update": meta}, self._attributes_action()]}

    def _attributes_action(self) -> dict[str, Any]:
        e = Expr()
        table, key = self.meta.table, schema.attrs_key(self.edit.session_id)
        if self.whole is not None:
            # Still the item the whole map was computed from (every placeholder sent is used:
            # DynamoDB refuses an unused one).
            if self.whole_rev is None:
                ours = e.v(self.edit.incarnation)
                unchanged = f"attribute_not_exists({e.n('pk')}) OR {e.n('incarnation')} <> {ours}"
            else:
                unchanged = f"{e.n('rev')} = {e.v(self.whole_rev)}"
            put = {"TableName": table, "Item": item_to_wire(self.whole)}
            return {"Put": {**put, "ConditionExpression": unchanged, **_old(e)}}
        counted, rev, incarnation = e.n("attrBytes"), e.n("rev"), e.n("incarnation")
        ours, added = e.v(self.edit.incarnation), e.v(self.edit.added)
        sets = [f"{e.k(name)} = {e.v(text)}" for name, text in self.edit.changes.items()]
        sets += [
            f"{counted} = if_not_exists({counted}, {e.v(EMPTY_MAP_BYTES)}) + {added}",
            f"{rev} = if_not_exists({rev}, {e.v(0)}) + {e.v(1)}",
            f"{incarnation} = {ours}, {e.n('ttl')} = {e.v(self.ttl)}",
        ]
        update = "SET " + ", ".join(sets)
        if self.edit.remove:
            update += " REMOVE " + ", ".join(e.k(name) for name in self.edit.remove)
        # None yet (this update creates it), or this session's with room for what this write
        # adds, whatever it replaces.
        room = e.v(ATTRIBUTES_MAX_BYTES - self.edit.added)
        condition = (
            f"attribute_not_exists({e.n('pk')}) OR ({incarnation} = {ours} AND {counted} <= {room})"
        )
        body = {"TableName": table, "Key": key, "UpdateExpression": update}
        return {"Update": {**body, "ConditionExpression": condition, **_old(e)}}

    def succeeded(self, response: dict[str, Any]) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Retry | None:
        assert isinstance(failure, Cancelled)
        if failure.failed(0):
            old = failure.old(0)
            if (
                old is not None
                and owned(old, self.meta.owner)
                and old.get("incarnation") != self.edit.incarnation
            ):
                # The session was created again since this change was built: change that one.
                self.edit.incarnation, self.ttl = str(old["incarnation"]), int(old["ttl"])
                self.whole = self.whole_rev = None
                return RETRY
            verdict = self.meta.refused(ConditionFailed(old, failure.ambiguous), now_ms)
            return RETRY if isinstance(verdict, Retry) else None
        if failure.failed(1):
            self.put_whole(stored(failure.old(1)))
            return RETRY
        raise DynamoDBError("TransactionCanceledException", repr(failure.reasons))

    def maybe_landed(self) -> None:
        pass  # the metadata write's token settles it

    def exhausted(self, attempts: int) -> SessionStoreError:
        if self.meta.current is None:  # refused on the attributes item only, by rival changes
            return gave_up(f"attribute change of session {self.edit.session_id!r}", attempts)
        return self.meta.exhausted(attempts)


def _old(e: Expr) -> dict[str, Any]:
    return {"ReturnValuesOnConditionCheckFailure": "ALL_OLD", **e.params()}
