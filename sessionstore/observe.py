"""What the write path tells whoever watches it: conflicts retried, answers lost, writes ended.

Layer: the bottom, beside ``errors``; it imports nothing of the store. Why: telemetry is an
observer of the writes, not a floor under them. The driver (``table``) and the wire (``wire``)
report here; an observer (``telemetry``) listens for the operation it measures, through a
context variable, so threads and asyncio tasks each see their own. With no listener every call
is a no-op.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol


class Listener(Protocol):
    def write_began(self) -> int:
        """A write begins; returns a mark that ``write_ended`` gets back."""

    def write_ended(self, mark: int, settled: bool) -> None:
        """The write that began at ``mark`` ended; ``settled``: its outcome is known (applied
        once, or provably not), so the responses it lost on the way are settled."""

    def conflict(self) -> None:
        """An attempt was refused by a concurrent writer and is retried."""

    def answers_lost(self, count: int) -> None:
        """A write's request ended with ``count`` HTTP attempts that may have landed
        (``wire.may_have_landed``) and whose answer never reached us."""


_LISTENER: ContextVar[Listener | None] = ContextVar("sessionstore_listener", default=None)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    reset = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(reset)


def write_began() -> int:
    listener = _LISTENER.get()
    return 0 if listener is None else listener.write_began()


def write_ended(mark: int, settled: bool) -> None:
    listener = _LISTENER.get()
    if listener is not None:
        listener.write_ended(mark, settled)


def conflict() -> None:
    listener = _LISTENER.get()
    if listener is not None:
        listener.conflict()


def answers_lost(count: int) -> None:
    listener = _LISTENER.get()
    if listener is not None:
        listener.answers_lost(count)
