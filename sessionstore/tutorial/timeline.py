"""Record the requests a block of code sends, each attempt with what came back.

Layer: beside the exercises, for the tutorial's pictures (``pictures``); nothing of the store
depends on it. Why not ``RequestLog`` alone: a picture of a race needs more than how many
requests were sent -- who sent each, its parameters, and whether it was written, refused (with
the item the refusal returned) or lost on the way back. ``Timeline`` keeps a ``RequestLog`` per
client and adds that, from botocore's ``before-send`` and ``response-received`` events, which
fire once per attempt on the wire, botocore's own retries included.
"""

from __future__ import annotations

import enum
import itertools
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Self

from ..testing.hooks import Attached
from ..testing.requests import RequestLog

#: Refusals by a condition: the request was valid, the item said no.
_REFUSALS = frozenset({"ConditionalCheckFailedException", "TransactionCanceledException"})
_ORDER = itertools.count()  # one order across every client of a timeline


class Outcome(enum.Enum):
    PENDING = "pending"
    OK = "ok"
    REFUSED = "refused"  # a condition said no (the refusal may carry ALL_OLD)
    LOST = "lost"  # no response: the request may or may not have been applied
    ERROR = "error"


@dataclass
class Attempt:
    """One request on the wire: who sent it, what, and what came back."""

    order: int
    actor: str
    operation: str
    params: dict[str, Any]
    outcome: Outcome = Outcome.PENDING
    code: str = ""
    response: dict[str, Any] = field(default_factory=dict)

    def old_item(self) -> dict[str, Any] | None:
        """The item a refusal returned (``ALL_OLD``), or None: for a transaction, the first
        refused action's."""
        if "Item" in self.response:
            item: dict[str, Any] = self.response["Item"]
            return item
        for reason in self.response.get("CancellationReasons", []):
            if reason.get("Code") == "ConditionalCheckFailed" and "Item" in reason:
                found: dict[str, Any] = reason["Item"]
                return found
        return None


class _ClientLog(RequestLog):
    """A RequestLog that also hands each attempt, with its outcome, to its timeline."""

    def __init__(self, client: Any, timeline: Timeline, actor: str) -> None:
        super().__init__(client)
        self.on("response-received.dynamodb", self._on_response)
        self._timeline, self._actor = timeline, actor
        self._pending = threading.local()

    def _on_send(self, request: Any, **kwargs: Any) -> None:
        super()._on_send(request, **kwargs)
        body = request.body.decode() if isinstance(request.body, bytes) else request.body
        attempt = Attempt(
            order=next(_ORDER),
            actor=self._timeline.current_actor() or self._actor,
            operation=kwargs.get("event_name", "").rsplit(".", 1)[-1],
            params=json.loads(body or "{}"),
        )
        self._pending.attempt = attempt
        self._timeline.attempts.append(attempt)

    def _on_response(self, parsed_response: Any = None, exception: Any = None, **_: Any) -> None:
        attempt: Attempt | None = getattr(self._pending, "attempt", None)
        if attempt is None:
            return
        self._pending.attempt = None
        if exception is not None or parsed_response is None:
            attempt.outcome = Outcome.LOST
            return
        attempt.response = dict(parsed_response)
        attempt.code = parsed_response.get("Error", {}).get("Code", "")
        if not attempt.code:
            attempt.outcome = Outcome.OK
        else:
            attempt.outcome = Outcome.REFUSED if attempt.code in _REFUSALS else Outcome.ERROR


class Timeline(Attached):
    """``with Timeline(Alice=client_a, Bob=client_b) as log:`` records every attempt each client
    sends inside the block, named by the keyword; ``log.by("...")`` names a stretch instead."""

    def __init__(self, **clients: Any) -> None:
        self.attempts: list[Attempt] = []
        self._named = threading.local()
        self.logs = {actor: _ClientLog(c, self, actor) for actor, c in clients.items()}

    def current_actor(self) -> str | None:
        name: str | None = getattr(self._named, "actor", None)
        return name

    @contextmanager
    def by(self, actor: str) -> Iterator[None]:
        """Name the requests sent inside the block ``actor`` (a delivery, an instance)."""
        before = self.current_actor()
        self._named.actor = actor
        try:
            yield
        finally:
            self._named.actor = before

    def attach(self) -> Self:
        for log in self.logs.values():
            log.attach()
        return self

    def detach(self, exc: BaseException | None = None) -> None:
        for log in self.logs.values():
            log.detach()

    def actors(self) -> list[str]:
        """Who sent, in order of first request."""
        return list(dict.fromkeys(a.actor for a in sorted(self.attempts, key=lambda a: a.order)))
