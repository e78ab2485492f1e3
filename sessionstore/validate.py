"""Argument checks shared by the pattern modules: each refuses with ``InvalidInput`` before
anything is sent.

Layer: the bottom, beside ``ids`` and ``errors``. Why: "a positive int" and "a session id and
its owner" are checked by every operation; written once, they read the same everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeGuard

from . import codec
from .errors import InvalidInput

#: Ten years: a ttl any longer is a units mistake.
MAX_TTL_SECONDS = 366 * 86400 * 10
#: The widest version, seq or duration: 20 digits (the widest version the metadata item is
#: sized for, ``item.METADATA_OVERHEAD``), well inside the 38 DynamoDB keeps exactly (past them
#: boto3 refuses the number with ``decimal.Rounded``).
MAX_INT = 10**20 - 1


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def int_in(name: str, value: object, low: int, high: int) -> int:
    """``value`` if it is an int in ``low..high`` (a bool, a float or a string is not)."""
    if not (is_int(value) and low <= value <= high):
        raise InvalidInput(f"{name} must be an int in {low}..{high}, got {_shown(value)}")
    return value


def optional_int_in(name: str, value: object, low: int, high: int) -> int | None:
    """``value`` if it is None or an int in ``low..high``."""
    if value is None:
        return None
    if not (is_int(value) and low <= value <= high):
        raise InvalidInput(f"{name} must be None or an int in {low}..{high}, got {_shown(value)}")
    return value


def seconds_in(name: str, value: object, low: float, high: float, *, above: bool = False) -> float:
    """``value`` if it is a finite number of seconds (an int or a float, not a bool) in
    ``low..high`` -- or, ``above``, past ``low``."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not (isinstance(value, float) and math.isnan(value))
        and (low < value if above else low <= value)
        and value <= high
    ):
        return float(value)
    bound = f"more than {low:g} and at most {high:g}" if above else f"in {low:g}..{high:g}"
    raise InvalidInput(f"{name} must be a number of seconds {bound}, got {_shown(value)}")


def ttl(ttl_seconds: object, idle_seconds: object = None, *, name: str = "ttl_seconds") -> int:
    """A ttl in whole seconds (and an idle period within it, if any)."""
    if not is_int(ttl_seconds):
        raise InvalidInput(f"{name} must be an int (seconds), got {_shown(ttl_seconds)}")
    if not 0 < ttl_seconds <= MAX_TTL_SECONDS:
        raise InvalidInput(f"{name} must be in 1..{MAX_TTL_SECONDS}, got {_shown(ttl_seconds)}")
    ttl = ttl_seconds
    if idle_seconds is not None and not (is_int(idle_seconds) and 0 < idle_seconds <= ttl):
        raise InvalidInput(
            f"idle_seconds must be None or an int in 1..{name} ({ttl}), got {_shown(idle_seconds)}"
        )
    return ttl


def expected_version(value: object) -> None:
    optional_int_in("expected_version", value, 1, MAX_INT)


def after(value: object) -> None:
    optional_int_in("after", value, 0, MAX_INT)


def duration_ms(value: object) -> int:
    return int_in("duration_ms", value, 0, MAX_INT)


def messages(value: object) -> list[str]:
    """Each message's exact JSON text."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise InvalidInput("messages must be a list of JSON values")
    if not value:
        raise InvalidInput("messages must not be empty")
    return [codec.encode(m, f"messages[{i}]") for i, m in enumerate(value)]
