"""Identifiers, injected: random ones in production, counters in notebooks and tests."""

from __future__ import annotations

import itertools
import re
import secrets
from typing import Protocol

from .errors import InvalidInput

MAX_ID_LENGTH = 128
#: Tokens are stored in up to 21 attributes of the metadata item (create, one per status, the
#: ring), so their length is part of the item-size reserve and is checked, not assumed.
MAX_TOKEN_LENGTH = 64


class IdFactory(Protocol):
    def session_id(self) -> str:
        """A new session id, unguessable in production (it is also the capability to use it)."""

    def token(self) -> str:
        """A request token that tells our own write apart from somebody else's."""


class RandomIds:
    """Session ids carry 128 bits from the OS CSPRNG. Tokens only need to be unique, not
    unguessable: 72 random bits per instance, then a counter (``itertools.count`` is atomic
    under the GIL), so a token costs no system call."""

    # Set on first use, so that subclasses need not call ``__init__`` (the policy README's
    # ``TenantIds`` does not). Two threads racing here each get a distinct prefix.
    _prefix: str | None = None
    _tokens: itertools.count[int]

    def session_id(self) -> str:
        return secrets.token_hex(16)

    def token(self) -> str:
        prefix = self._prefix
        if prefix is None:
            self._tokens = itertools.count(1)
            prefix = self._prefix = secrets.token_urlsafe(9) + "."
        return f"{prefix}{next(self._tokens):x}"


class CounterIds:
    """Deterministic ids for notebooks and tests: ``s-0001``, ``t-0001``, ... (thread-safe, as
    ``itertools.count`` is atomic under the GIL)."""

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
