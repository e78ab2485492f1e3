"""Identifiers, injected: random ones in production, counters in notebooks and tests."""

from __future__ import annotations

import itertools
import os
import re
import secrets
from typing import Protocol

from .errors import InvalidInput

__all__ = [
    "MAX_ID_LENGTH",
    "CounterIds",
    "IdFactory",
    "RandomIds",
    "validate_id",
    "validate_session",
]

MAX_ID_LENGTH = 128
#: A token names its write's entry in ``tk`` and is kept whole (a session's ``incarnation``, in
#: page and call items), so its length is part of those items' size bounds: checked, not assumed.
MAX_TOKEN_LENGTH = 64

#: Bumped in every child process a fork makes: a ``RandomIds`` that sees another generation
#: than its prefix's draws a new prefix, so a forked worker never repeats its parent's tokens
#: (or a sibling's: every child inherits the same prefix and counter).
_generation = 0


def _forked() -> None:
    global _generation
    _generation += 1


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_forked)


class IdFactory(Protocol):
    def session_id(self) -> str:
        """A new session id, unguessable in production (it is also the capability to use it)."""

    def token(self) -> str:
        """A token unique across instances: it tells our own write apart from somebody else's,
        and names an ask (``asks``), whose id the client sees -- so never a secret."""


class RandomIds:
    """Session ids carry 128 bits from the OS CSPRNG. Tokens only need to be unique, not
    unguessable (an ask's id, which holds one, goes to the client; what guards an ask is its
    session): 72 random bits per process, then a counter (``itertools.count`` is atomic under
    the GIL), so a token costs no system call.

    The prefix is drawn again in a process forked after it was drawn (a pre-fork server, a
    ``multiprocessing`` fork pool) and is not pickled (a spawned worker handed the factory), so
    no two processes share one, whatever the start method."""

    # ``(generation, prefix, counter)``, set on first use, so that subclasses need not call
    # ``__init__`` (the policy README's ``TenantIds`` does not). One tuple, assigned once and read
    # once: two threads racing here each get a prefix of their own with a counter of its own.
    _drawn: tuple[int, str, itertools.count[int]] | None = None

    def session_id(self) -> str:
        return secrets.token_hex(16)

    def token(self) -> str:
        drawn = self._drawn
        if drawn is None or drawn[0] != _generation:
            drawn = self._drawn = (_generation, secrets.token_urlsafe(9) + ".", itertools.count(1))
        return f"{drawn[1]}{next(drawn[2]):x}"

    def __getstate__(self) -> dict[str, object]:
        # The prefix and counter stay with this process: a copy draws its own.
        state = dict(vars(self))
        state.pop("_drawn", None)
        return state


class CounterIds:
    """Deterministic ids for notebooks and tests: ``s-0001``, ``t-0001``, ... (thread-safe, as
    ``itertools.count`` is atomic under the GIL). For one process only: forked workers would
    repeat each other's ids (give each its own ``prefix``)."""

    def __init__(self, prefix: str = "") -> None:
        self._sessions = itertools.count(1)
        self._tokens = itertools.count(1)
        self._prefix = prefix

    def session_id(self) -> str:
        return f"{self._prefix}s-{next(self._sessions):04d}"

    def token(self) -> str:
        return f"{self._prefix}t-{next(self._tokens):04d}"


def validate_id(value: object, what: str) -> str:
    """Ids are 1-128 visible ASCII characters (0x21-0x7E): they end up inside key strings."""
    if type(value) is str and _ID.match(value) is not None:  # the common case, in C
        return value
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, not {type(value).__name__}")
    if not 1 <= len(value) <= MAX_ID_LENGTH:
        raise InvalidInput(f"{what} must be 1-{MAX_ID_LENGTH} characters, got {len(value)}")
    if not all("\x21" <= ch <= "\x7e" for ch in value):
        raise InvalidInput(f"{what} may hold only visible ASCII characters (0x21-0x7E)")
    return value


_ID = re.compile(rf"[\x21-\x7e]{{1,{MAX_ID_LENGTH}}}\Z")


def validate_token(value: object) -> str:
    """A request token from an ``IdFactory``: 1-64 visible ASCII characters."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_TOKEN_LENGTH:
        raise InvalidInput(
            f"IdFactory.token() must return a string of 1-{MAX_TOKEN_LENGTH} characters, "
            f"got {value!r:.80}"
        )
    return validate_id(value, "token")


def validate_session(session_id: object, owner: object) -> None:
    """A session id and, unless None, its owner: ``InvalidInput`` before anything is sent."""
    validate_id(session_id, "session_id")
    if owner is not None:
        validate_id(owner, "owner")
