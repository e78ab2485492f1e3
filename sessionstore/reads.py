"""Reading a session: the metadata item checked live and the caller's, with its attributes.

Layer: over ``locking`` (the metadata item's read) and ``attributes`` (their item); under the
reads of the context and the tool calls, which start from ``head``. Every read is strongly
consistent: a session is read to be written, and a hint is never the truth.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from . import attributes, locking, schema
from .backend import Backend, PageScope
from .errors import SessionNotFound
from .item import live
from .memory import Memory
from .models import Session


def get(backend: Backend, memory: Memory, session_id: str, owner: str | None) -> Session:
    """One GetItem of the metadata item, and one of the attributes item unless the session
    never had attributes or this instance holds their current copy."""
    return attributes.attach(backend, memory, locking.read(backend, memory, session_id, owner))


def head(
    backend: Backend,
    memory: Memory,
    session_id: str,
    owner: str | None,
    high: str,
    each_page: PageScope | None = None,
) -> tuple[Session, dict[str, Any], Iterator[dict[str, Any]]]:
    """One Query of the session's items from the metadata item to ``high``: the live session
    with its attributes (their item sorts right after it), its item as read, and the items
    after those (read lazily)."""
    items = backend.query(schema.pk(session_id), schema.META_SK, high, each_page=each_page)
    first = next(items, None)
    if first is None or first["sk"] != schema.META_SK:
        raise SessionNotFound(session_id)
    session = memory.remember(live(session_id, first, owner, backend.now_ms() // 1000))
    following = next(items, None)
    if following is not None and following["sk"] == schema.ATTRS_SK:
        memory.keep_attributes(session_id, attributes.stored(following))
    elif following is not None:
        items = itertools.chain((following,), items)
    return attributes.attach(backend, memory, session), first, items
