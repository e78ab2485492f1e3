"""Argument checks shared by the pattern modules: each refuses with ``InvalidInput`` before
anything is sent.

Layer: the bottom, beside ``ids`` and ``errors``. Why: "a positive int" and "a session id and
its owner" are checked by every operation; written once, they read the same everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeGuard

from . import codec
from .errors import InvalidInput
from .ids import validate_id

#: Ten years: a ttl any longer is a units mistake.
MAX_TTL_SECONDS = 366 * 86400 * 10


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def int_in(name: str, value: object, low: int, high: int) -> int:
    """``value`` if it is an int in ``low..high``."""
    if not (is_int(value) and low <= value <= high):
        raise InvalidInput(f"{name} must be an int in {low}..{high}, got {value!r}")
    return value


def session(session_id: object, owner: object) -> None:
    validate_id(session_id, "session_id")
    if owner is not None:
        validate_id(owner, "owner")


def ttl(ttl_seconds: object, idle_seconds: object = None) -> None:
    if not is_int(ttl_seconds):
        raise InvalidInput("ttl_seconds must be an int (seconds)")
    if not 0 < ttl_seconds <= MAX_TTL_SECONDS:
        raise InvalidInput(f"ttl_seconds must be in 1..{MAX_TTL_SECONDS}, got {ttl_seconds}")
    if idle_seconds is not None and not (is_int(idle_seconds) and 0 < idle_seconds <= ttl_seconds):
        raise InvalidInput(
            f"idle_seconds must be None or an int in 1..ttl_seconds ({ttl_seconds}), "
            f"got {idle_seconds!r}"
        )


def expected_version(value: object) -> None:
    if value is not None and not (is_int(value) and value >= 1):
        raise InvalidInput("expected_version must be a positive int")


def after(value: object) -> None:
    if value is not None and not (is_int(value) and value >= 0):
        raise InvalidInput("after must be None or a seq (an int >= 0)")


def messages(value: object) -> list[str]:
    """Each message's exact JSON text."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InvalidInput("messages must be a list of JSON values")
    if not value:
        raise InvalidInput("messages must not be empty")
    return [codec.encode(m, f"messages[{i}]") for i, m in enumerate(value)]
