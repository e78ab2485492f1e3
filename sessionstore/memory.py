"""Session memory: what this instance last saw of each session, kept as hints.

Layer: beside ``backend``, under the pattern modules, which receive it explicitly. Why: a hint
lets the first attempt of a read-modify-write skip the read, and lets a write remove the old
request tokens it saw -- but it is never the truth: a stale hint costs one retry and never
refuses anything by itself. Three maps, each one ``Recent`` (a bounded, locked LRU):

* ``seen``: the last copy of each session (per incarnation; versions only go up within one);
* ``settled``: this instance's finished writes per session, whose tokens in ``tk`` are dead, so
  the next write to the session removes them (``write_tokens``);
* ``attributes``: the last attributes read or written per session: a write's ALL_NEW has only
  the metadata item, whose ``attrsRev`` says whether this copy is still current.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from .errors import TokensFull, VersionConflict
from .models import Session, StoredAttributes
from .write_tokens import TOKEN_CAP, key

V = TypeVar("V")

#: Sessions this instance keeps hints (and settled tokens) for.
MAX_SESSIONS = 10_000


class Recent(Generic[V]):
    """A bounded LRU map from session id to ``V``; past ``size`` the oldest is forgotten."""

    __slots__ = ("_items", "_lock", "size")

    def __init__(self, size: int = MAX_SESSIONS) -> None:
        self.size = size
        self._items: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, session_id: str) -> V | None:
        return self._items.get(session_id)  # one dict read: atomic, no lock needed

    def put(self, session_id: str, value: V, merge: Callable[[V, V], V] | None = None) -> None:
        """Keep ``value`` (or ``merge(old, value)`` when there is an old one) as the newest."""
        with self._lock:
            old = self._items.get(session_id)
            if old is not None and merge is not None:
                value = merge(old, value)
            self._items[session_id] = value
            self._items.move_to_end(session_id)
            if len(self._items) > self.size:
                self._items.popitem(last=False)


def _newer(old: Session, new: Session) -> Session:
    # Another incarnation (the id was reused after TTL removed the session) replaces the hint
    # whatever its version; within one incarnation versions only go up (a tie keeps the new).
    if old.incarnation != new.incarnation:
        return new
    return max(new, old, key=lambda copy: copy.version)


class Memory:
    """This instance's hints about the sessions it has written or read."""

    __slots__ = ("attributes", "seen", "settled")

    def __init__(self, size: int = MAX_SESSIONS) -> None:
        self.seen: Recent[Session] = Recent(size)
        self.settled: Recent[tuple[str, ...]] = Recent(size)
        self.attributes: Recent[StoredAttributes] = Recent(size)

    def remember(self, session: Session) -> Session:
        self.seen.put(session.session_id, session, _newer)
        return session

    def hint(self, session_id: str, owner: str | None, now_s: int) -> Session | None:
        """The hint for ``session_id`` -- only for its own owner (acting on another owner's hint
        would tell them the session exists), and only while its ttl has not passed (after that
        the id may belong to a new incarnation)."""
        seen = self.seen.get(session_id)
        if seen is None or seen.owner != owner or seen.ttl <= now_s:
            return None
        return seen

    def settle(self, session_id: str, token: str, removed: tuple[str, ...]) -> None:
        """A write to ``session_id`` has ended: its token is dead; the tokens its landed attempt
        removed are gone. Past the cap the oldest are forgotten: the horizon removes them."""

        def merge(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[str, ...]:
            tokens = [t for t in old if key(t) not in removed and t != token]
            return tuple([*tokens, token][-TOKEN_CAP:])

        self.settled.put(session_id, (token,), merge)

    @contextmanager
    def refusals(self) -> Iterator[None]:
        """A refusal that ends a write with the item as it is (a stale version, a full token
        map): that item becomes the hint."""
        try:
            yield
        except (VersionConflict, TokensFull) as exc:
            self.remember(exc.current)
            raise

    def keep_attributes(self, session_id: str, stored: StoredAttributes | None) -> None:
        if stored is not None:
            self.attributes.put(session_id, stored)
