"""Time, injected. The store never calls ``time`` itself, so notebooks and tests control it.

One unit inside the package: integer epoch **milliseconds**. ``ttl`` is stored in epoch
*seconds* (DynamoDB's TTL ignores anything else); timestamps are fixed-width UTC strings so
that they sort as text.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "format_timestamp", "parse_timestamp"]


class Clock(Protocol):
    def now_ms(self) -> int:
        """Current time in epoch milliseconds."""


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to, optionally by ``tick_ms`` on every reading;
    ``ManualClock("2026-01-01T12:00:00Z")`` starts at that instant."""

    def __init__(self, start: int | str = 1_767_268_800_000, *, tick_ms: int = 0) -> None:
        self._now = parse_timestamp(start) if isinstance(start, str) else int(start)
        self._tick = tick_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            now = self._now
            self._now += self._tick
            return now

    def advance(self, *, seconds: float = 0, ms: int = 0) -> None:
        with self._lock:
            self._now += ms + round(seconds * 1000)


#: Every write stamps ``updatedAt``; within one second only the milliseconds differ.
_LAST_SECOND: tuple[int, str] = (-1, "")


def format_timestamp(epoch_ms: int) -> str:
    """``2026-01-01T12:00:00.000Z``: always 24 characters, so text order is time order."""
    global _LAST_SECOND
    seconds, ms = divmod(epoch_ms, 1000)
    cached = _LAST_SECOND  # one tuple, replaced whole: safe to share between threads
    if cached[0] != seconds:
        dt = datetime.fromtimestamp(seconds, tz=UTC)
        cached = _LAST_SECOND = (seconds, dt.strftime("%Y-%m-%dT%H:%M:%S."))
    return f"{cached[1]}{ms:03d}Z"


def parse_timestamp(text: str) -> int:
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return round(dt.timestamp() * 1000)
