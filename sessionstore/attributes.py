"""Session attributes: a small map of JSON values on the metadata item.

A protocol version, client info, a title, counters: what a server wants to know about a session
on every request, read with the session itself (no extra request). Names match
``[A-Za-z][A-Za-z0-9_.-]{0,63}`` and are never the store's own fields; values are kept as their
exact JSON text; the whole map takes at most ``ATTRIBUTES_MAX_BYTES`` (part of
``item.METADATA_OVERHEAD``, so it bounds what every write to the item is billed).

A change without ``expected_version`` goes last-writer-wins per name (``locking``), so writers
never refuse each other. The bound is kept without knowing the values being replaced:
``attrBytes`` is an *upper bound* of the map's size. Such a write adds the size of what it
writes and subtracts nothing; its condition ``attrBytes <= max - added`` keeps the bound, and so
the map, under the limit. When the bound would refuse, the next attempt is pinned to the version
of the item the refusal returned and sets ``attrBytes`` to the exact size -- so the bound only
ever refuses what really does not fit. Re-sending a landed change sets the same values again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import codec
from .errors import InvalidInput, ItemTooLarge, SessionNotActive
from .expressions import Expr
from .lifecycle import Status

if TYPE_CHECKING:
    from .models import Session

#: The most bytes a session's attributes may take (the ``attrs`` map, sized by DynamoDB's rules:
#: 3 + per attribute its name, its JSON text and 1).
ATTRIBUTES_MAX_BYTES = 4096
EMPTY_MAP_BYTES = 3

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}\Z")
#: Names that would read like the store's own fields (on the item or on ``Session``), refused
#: whatever their case so that ``session.attributes["Status"]`` never passes for the status.
RESERVED_ATTRIBUTE_NAMES = frozenset(
    name.lower()
    for name in (
        *("pk", "sk", "sessionId", "session_id", "version", "status", "owner", "createdAt"),
        *("created_at", "updatedAt", "updated_at", "ttl", "context", "contextBytes"),
        *("messageCount", "message_count", "context_bytes", "incarnation", "attrs"),
        *("attributes", "attrBytes", "attribute_bytes", "tk", "write_tokens"),
    )
)


def attribute_bytes(name: str, text: str) -> int:
    """What one attribute adds to the ``attrs`` map (names are ASCII)."""
    return len(name) + len(text.encode("utf-8")) + 1


def attributes_size(attrs: Mapping[str, str]) -> int:
    return EMPTY_MAP_BYTES + sum(attribute_bytes(k, v) for k, v in attrs.items())


def validate_name(name: object) -> str:
    if not isinstance(name, str) or _NAME.match(name) is None:
        raise InvalidInput(
            f"attribute names must match [A-Za-z][A-Za-z0-9_.-]{{0,63}}, got {name!r:.80}"
        )
    if name.lower() in RESERVED_ATTRIBUTE_NAMES:
        raise InvalidInput(f"attribute name {name!r} is one of the store's own fields")
    return name


def attribute_texts(values: object, what: str) -> tuple[dict[str, str], int]:
    """Validated names -> exact JSON text of each value, and the bytes they add to the map."""
    if not isinstance(values, Mapping):
        raise InvalidInput(f"{what} must be a mapping of attribute names to JSON values")
    texts: dict[str, str] = {}
    added = 0
    for name, value in values.items():
        validate_name(name)
        texts[name] = text = codec.encode(value, f"{what}[{name!r}]")
        added += attribute_bytes(name, text)
    return texts, added


@dataclass(slots=True)
class AttributesEdit:
    """``update_attributes`` (an ``Edit`` for ``locking.MetadataWrite``): set and remove
    entries of ``attrs`` on a session that is not closed, within ``ATTRIBUTES_MAX_BYTES``."""

    session_id: str
    changes: dict[str, str]
    remove: tuple[str, ...]
    added: int

    def after(self, current: Session) -> dict[str, str]:
        """The attributes ``current`` would have after this edit (stored JSON text)."""
        out = {k: v for k, v in current.attributes.raw.items() if k not in self.remove}
        out.update(self.changes)
        return out

    def clauses(self, e: Expr, exact: Session | None) -> tuple[str, str, str]:
        attrs, counted = e.n("attrs"), e.n("attrBytes")
        sets = [f"{attrs}.{e.k(name)} = {e.v(text)}" for name, text in self.changes.items()]
        removes = ", ".join(f"{attrs}.{e.k(name)}" for name in self.remove)
        not_closed = f"{e.n('status')} <> {e.v(Status.CLOSED.value)}"
        if exact is not None:  # pinned to this item: the exact size
            sets.append(f"{counted} = {e.v(attributes_size(self.after(exact)))}")
            return ", ".join(sets), removes, not_closed
        sets.append(f"{counted} = {counted} + {e.v(self.added)}")
        room = f"{counted} <= {e.v(ATTRIBUTES_MAX_BYTES - self.added)}"
        return ", ".join(sets), removes, f"{not_closed} AND {room}"

    def token_value(self, e: Expr, now_s: int) -> str:
        return e.v(now_s)

    def judge(self, current: Session) -> Session | None:
        if current.status is Status.CLOSED:
            raise SessionNotActive(self.session_id, current.status)
        now = attributes_size(current.attributes.raw)
        new = attributes_size(self.after(current))
        if new > ATTRIBUTES_MAX_BYTES:
            raise ItemTooLarge(now, new - now, ATTRIBUTES_MAX_BYTES, what="attributes")
        return None

    def needs_exact(self, current: Session) -> bool:
        return current.attribute_bytes + self.added > ATTRIBUTES_MAX_BYTES
