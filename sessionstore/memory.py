"""Session memory: what this instance last saw of each session, kept as hints.

Layer: held by the ``Table`` (``table.memory``), under the pattern modules, which reach it
through the table they are given. Why: a hint lets the first attempt of a read-modify-write
skip the read, and lets a write remove the old request tokens it saw -- but it is never the
truth: a stale hint costs one retry and never refuses anything by itself. Three maps, each one
``Recent`` (a bounded, locked LRU):

* ``seen``: the last copy of each session (per incarnation; versions only go up within one);
* ``settled``: this instance's finished writes per session, whose tokens in ``tk`` are dead, so
  the next write to the session removes them (``write_tokens``);
* ``attributes``: the last attributes read or written per session: a write's ALL_NEW has only
  the metadata item, whose ``attrsRev`` says whether this copy is still current.

A copy read (or put whole) is exact at its ``rev``. A copy a change computed without reading
(``guess``) is the base plus the change, labelled ``base.rev + 1``, and is exact only if that
change is the one that made that rev -- which a transaction does not say. So a guess is kept
only while the copy is still its base (compare-and-set: a concurrent change on this instance
never overwrites the other's copy), it carries its change's request token, and it is trusted
(``current``) only once a metadata item shows that token with ``attrsRev`` equal to its
``rev``: the change landed before that item was read, so its rev is at most that one, and at
least ``base.rev + 1``. Until then the token stays in ``tk`` (it is settled, so that the next
write removes it, when the guess is confirmed or replaced).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, NamedTuple, TypeVar

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

        def change(old: V | None) -> V:
            return value if old is None or merge is None else merge(old, value)

        self.swap(session_id, change)

    def swap(self, session_id: str, change: Callable[[V | None], V | None]) -> V | None:
        """Under the lock: keep ``change(old)`` as the newest, unless it is ``old`` itself
        (nothing changes); the value it replaced, or None."""
        with self._lock:
            old = self._items.get(session_id)
            value = change(old)
            if value is old or value is None:
                return None
            self._items[session_id] = value
            self._items.move_to_end(session_id)
            if len(self._items) > self.size:
                self._items.popitem(last=False)
            return old

    def discard(self, session_id: str, value: V) -> bool:
        """Forget ``session_id`` if ``value`` is still what is kept for it; whether it was."""
        with self._lock:
            if self._items.get(session_id) is not value:
                return False
            del self._items[session_id]
            return True


class Copy(NamedTuple):
    """A copy of a session's attributes; ``guessed_by``: the request token of the change that
    computed it without reading, until a metadata item confirms it (None: exact)."""

    stored: StoredAttributes
    guessed_by: str | None = None


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
        self.attributes: Recent[Copy] = Recent(size)

    def remember(self, session: Session) -> Session:
        self.seen.put(session.session_id, session, _newer)
        self._judge_guess(session)
        return session

    def hint(self, session_id: str, owner: str | None, now_s: int) -> Session | None:
        """The hint for ``session_id`` -- only for its own owner (acting on another owner's hint
        would tell them the session exists), and only while its ttl has not passed (after that
        the id may belong to a new incarnation)."""
        seen = self.seen.get(session_id)
        if seen is None or seen.owner != owner or seen.ttl <= now_s:
            return None
        return seen

    def settle(
        self, session_id: str, token: str, removed: tuple[str, ...], *, dead: bool = True
    ) -> None:
        """A write to ``session_id`` has ended: its token is dead (unless ``dead`` is False: a
        guess of its attributes waits for it, see ``guess``); the tokens its landed attempt
        removed are gone. Past the cap the oldest are forgotten: the horizon removes them."""
        added = (token,) if dead else ()

        def merge(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[str, ...]:
            tokens = [t for t in old if key(t) not in removed and t != token]
            return tuple([*tokens, *new][-TOKEN_CAP:])

        self.settled.put(session_id, added, merge)

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
        """Keep an exact copy (read, or put whole) -- unless the one kept is an exact copy of
        a later ``rev`` of the same incarnation."""
        if stored is None:
            return

        def change(old: Copy | None) -> Copy | None:
            if old is not None and old.guessed_by is None and _later(old.stored, stored):
                return old
            return Copy(stored)

        self._replaced(session_id, self.attributes.swap(session_id, change))

    def guess(
        self, session_id: str, after: StoredAttributes, base: StoredAttributes, by: str
    ) -> bool:
        """Keep ``after``, computed by the change whose token is ``by`` from ``base`` without
        reading, only if the copy kept is still ``base`` (no copy for a base of ``rev`` 0):
        whether it was kept (if not, the caller settles ``by``)."""

        kept = False

        def change(old: Copy | None) -> Copy | None:
            nonlocal kept
            if old is None or old.stored.incarnation != base.incarnation:
                kept = base.rev == 0  # no copy of this incarnation: only none is the base
            else:
                kept = old.stored == base
            return Copy(after, by) if kept else old

        self._replaced(session_id, self.attributes.swap(session_id, change))
        return kept

    def forget_guess(self, session_id: str) -> None:
        """Drop the guess kept for ``session_id``, if any (and settle its token)."""
        copy = self.attributes.get(session_id)
        if copy is None or copy.guessed_by is None:
            return
        self._drop(session_id, copy)

    def _judge_guess(self, session: Session) -> None:
        """The first item seen that names a guess's token settles it: confirmed if it shows
        the guess's rev, else dropped (another change came between); either way the token is
        dead, so it stays in ``tk`` no longer than that."""
        copy = self.attributes.get(session.session_id)
        if copy is None or copy.guessed_by is None:
            return
        if copy.stored.incarnation != session.incarnation:
            return
        if key(copy.guessed_by) not in session.write_tokens:
            return
        if copy.stored.rev == session.attributes_rev:
            self._confirm(session.session_id, copy)
        else:
            self._drop(session.session_id, copy)

    def current(self, session: Session) -> StoredAttributes | None:
        """The copy of ``session``'s attributes if it is of its incarnation and not older than
        its ``attrsRev`` -- a guess of exactly that rev only if ``session`` names the guessing
        change's token (then it is confirmed: exact from now on)."""
        copy = self.attributes.get(session.session_id)
        if copy is None or copy.stored.incarnation != session.incarnation:
            return None
        rev, by = copy.stored.rev, copy.guessed_by
        if rev < session.attributes_rev:
            return None
        if by is None or rev > session.attributes_rev:
            return copy.stored
        if key(by) not in session.write_tokens:
            return None  # this rev may be another change's: read the item
        self._confirm(session.session_id, copy)
        return copy.stored

    def _confirm(self, session_id: str, guess: Copy) -> None:
        """``guess`` is exact: kept as an exact copy, if it is still what is kept."""
        confirmed = Copy(guess.stored)
        replaced = self.attributes.swap(session_id, lambda old: confirmed if old is guess else old)
        self._replaced(session_id, replaced)

    def _drop(self, session_id: str, guess: Copy) -> None:
        """``guess`` will not be confirmed: forgotten, if it is still what is kept."""
        if self.attributes.discard(session_id, guess):
            self._replaced(session_id, guess)

    def _replaced(self, session_id: str, old: Copy | None) -> None:
        """A guess no longer kept: its change's token is dead, the next write removes it."""
        if old is not None and old.guessed_by is not None:
            self.settle(session_id, old.guessed_by, ())


def _later(kept: StoredAttributes, new: StoredAttributes) -> bool:
    return kept.incarnation == new.incarnation and kept.rev > new.rev
