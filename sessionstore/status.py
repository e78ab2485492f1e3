"""The session lifecycle: statuses and the one table of allowed moves."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    INITIALIZING = "initializing"
    ACTIVE = "active"
    CLOSING = "closing"
    CLOSED = "closed"


#: The only source of truth for the state machine. A move not listed here is refused by a
#: condition expression on the server, never by a read followed by a write.
TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.INITIALIZING: frozenset({Status.ACTIVE, Status.CLOSING}),
    Status.ACTIVE: frozenset({Status.CLOSING}),
    Status.CLOSING: frozenset({Status.CLOSED}),
    Status.CLOSED: frozenset(),
}


def sources(target: Status) -> list[Status]:
    """Statuses from which ``target`` may be entered, in declaration order."""
    return [s for s in Status if target in TRANSITIONS[s]]


def allowed(current: Status, target: Status) -> bool:
    return target in TRANSITIONS[current]
