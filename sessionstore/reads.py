"""Reading a session: the metadata item checked live and the caller's, with its attributes.

Layer: over ``table`` (its ``memory`` inside); under the patterns that read a session before writing
it or return it after (``lifecycle``, ``context``, ``attributes``, ``tool_calls``). Every read
is strongly consistent: a session is read to be written, and a hint is never the truth.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from . import schema
from .errors import SessionNotFound, SessionStoreError, Unavailable, VersionConflict
from .item import live, stored
from .models import Session, StoredAttributes
from .table import PageScope, Table


def read_item(table: Table, session_id: str, owner: str | None) -> tuple[Session, dict[str, Any]]:
    """The live session (its metadata item alone), and the item as read: one GetItem."""
    item = table.get(schema.meta_key(session_id))
    session = table.memory.remember(live(session_id, item, owner, table.now_ms() // 1000))
    assert item is not None
    return session, item


def read(table: Table, session_id: str, owner: str | None) -> Session:
    return read_item(table, session_id, owner)[0]


def get(table: Table, session_id: str, owner: str | None) -> Session:
    """One GetItem of the metadata item, and one of the attributes item unless the session
    never had attributes or this instance holds their current copy."""
    return attach(table, read(table, session_id, owner))


def head(
    table: Table, session_id: str, owner: str | None, high: str, each_page: PageScope | None = None
) -> tuple[Session, dict[str, Any], Iterator[dict[str, Any]]]:
    """One Query of the session's items from the metadata item to ``high``: the live session
    with its attributes (their item sorts right after it), its item as read, and the items
    after those (read lazily)."""
    items = table.query(schema.pk(session_id), schema.META_SK, high, each_page=each_page)
    first = next(items, None)
    if first is None or first["sk"] != schema.META_SK:
        raise SessionNotFound(session_id)
    session = table.memory.remember(live(session_id, first, owner, table.now_ms() // 1000))
    following = next(items, None)
    if following is not None and following["sk"] == schema.ATTRS_SK:
        copy = stored(following)
        table.memory.keep_attributes(session_id, copy)
        if copy is not None and copy.incarnation == session.incarnation:
            # The item just read (after the metadata item: never older), whatever a
            # concurrent change on this instance keeps meanwhile.
            return _with(session, copy), first, items
    elif following is not None:
        items = itertools.chain((following,), items)
    return attach(table, session), first, items


def attach(table: Table, session: Session) -> Session:
    """``session`` (the metadata item alone) with its attributes: none if it never had any,
    this instance's copy if still current, else the attributes item read now (one GetItem; it
    may show a change made after ``session`` was read, never an older one)."""
    if session.attributes_rev == 0:
        return session
    copy = table.memory.current(session)
    if copy is None:
        copy = stored(table.get(schema.attrs_key(session.session_id)))
        if copy is None or copy.incarnation != session.incarnation:
            return session  # gone since: TTL removed the session, or it was created again
        table.memory.keep_attributes(session.session_id, copy)
    return _with(session, copy)


def _with(session: Session, copy: StoredAttributes) -> Session:
    return dataclasses.replace(session, attributes=copy.attributes, attribute_bytes=copy.bytes)


def landed(table: Table, session: Session, what: str) -> Session:
    """``attach`` after a write that has landed: a failed read must not make the write look
    unwritten, or a caller would send it again."""
    try:
        return attach(table, session)
    except SessionStoreError as exc:
        raise Unavailable(
            f"{what} was applied; reading the session after it failed: {exc}", maybe_applied=True
        ) from exc


@contextmanager
def on_conflict(table: Table) -> Iterator[None]:
    """A ``VersionConflict`` raised inside carries the session with its attributes, if they
    can be had: a failed read must not hide the conflict."""
    try:
        yield
    except VersionConflict as exc:  # ConflictRetriesExhausted too
        with suppress(SessionStoreError):
            exc.current = attach(table, exc.current)
        raise
