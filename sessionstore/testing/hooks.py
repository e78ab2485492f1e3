"""Handlers on a botocore client's events, for the length of a ``with`` block.

Layer: the test kit's base, botocore's event API only: ``RequestLog``, ``FaultInjector``, the
tutorial's ``Timeline`` and its checkers' rival writers are each a ``Hooks``. Why: attach once,
detach once and the ``with`` protocol were written out in each; ``Attached`` is that protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

__all__ = ["Attached", "Hooks"]


class Attached:
    """``with x:`` is ``x.attach()``, the block, then ``x.detach(exc)``."""

    __slots__ = ()

    def attach(self) -> Self:
        return self

    def detach(self, exc: BaseException | None = None) -> None:
        """Undo ``attach``; ``exc``: what ended the block, if anything did."""

    def __enter__(self) -> Self:
        return self.attach()

    def __exit__(self, _type: object, exc: BaseException | None, _tb: object) -> None:
        self.detach(exc)


class Hooks(Attached):
    """Handlers ``on`` ``client``'s events, registered by ``attach()``, removed by ``detach()``,
    each once; ``first=True``: ahead of the handlers already there (``register_first``)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.attached = False
        self._handlers: list[tuple[str, Callable[..., Any], bool]] = []

    def on(self, event: str, handler: Callable[..., Any], *, first: bool = False) -> Self:
        self._handlers.append((event, handler, first))
        return self

    def attach(self) -> Self:
        if not self.attached:
            events = self.client.meta.events
            for event, handler, first in self._handlers:
                (events.register_first if first else events.register)(event, handler)
            self.attached = True
        return self

    def detach(self, exc: BaseException | None = None) -> None:
        if self.attached:
            for event, handler, _ in self._handlers:
                self.client.meta.events.unregister(event, handler)
            self.attached = False
