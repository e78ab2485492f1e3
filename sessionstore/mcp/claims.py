"""Tool-call claims as the MCP layer runs them: the operations of ``sessionstore.claims`` (where
the claims are written and answered), each an operation of its own for telemetry (a span and a
tally, as the store's methods are: ``traced``), and run over a ``SessionStore``'s ``backend`` and
``memory`` for code that holds a store -- a server of its own, a notebook, a test. The extension
(``calls``) runs ``traced`` operations on its worker threads.

Layer: over the core's public API; the core's claims stay free of telemetry, which observes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from .. import claims as core
from .. import round_trips, telemetry
from ..claims import Claim, Outcome, State, answer, call_fingerprint
from ..codec import JSON
from ..store import SessionStore

F = TypeVar("F", bound=Callable[..., Any])

_TRACED: dict[Callable[..., Any], Callable[..., Any]] = {
    operation: telemetry.traced(name)(operation)
    for operation, name in (
        (core.claim, "claim_tool_call"),
        (round_trips.start_round, "start_round"),
        (round_trips.suspend_round, "suspend_round"),
        (core.complete, "complete_tool_call"),
        (core.put_record, "record_tool_call"),
        (round_trips.renew, "renew_lease"),
    )
}


def traced(operation: F) -> F:
    """``operation`` (one of the core's claim operations) measured as an operation of its own."""
    return cast(F, _TRACED[operation])


__all__ = [
    "Claim",
    "Outcome",
    "State",
    "answer",
    "call_fingerprint",
    "claim",
    "complete",
    "put_record",
    "start_round",
    "suspend_round",
    "traced",
]


def claim(
    store: SessionStore,
    session_id: str,
    tool_call_id: str,
    tool_name: str,
    arguments: JSON,
    *,
    owner: str | None,
    ttl: int,
    lease_ms: int,
) -> Outcome:
    """``sessionstore.claims.claim``: claim ``tool_call_id`` for one execution, or say why not."""
    return traced(core.claim)(
        store.table,
        session_id,
        tool_call_id,
        tool_name,
        arguments,
        owner=owner,
        ttl=ttl,
        lease_ms=lease_ms,
    )


def start_round(
    store: SessionStore, claimed: Claim, round_number: int, *, lease_ms: int
) -> Outcome:
    """``sessionstore.round_trips.start_round``: take a later round of a call, once."""
    return traced(round_trips.start_round)(store.table, claimed, round_number, lease_ms=lease_ms)


def suspend_round(store: SessionStore, claimed: Claim, round_number: int, answer_json: str) -> None:
    """``sessionstore.round_trips.suspend_round``: keep a round's answer for a re-sent round."""
    traced(round_trips.suspend_round)(store.table, claimed, round_number, answer_json)


def complete(
    store: SessionStore,
    session_id: str,
    tool_call_id: str,
    claimed: Claim,
    arguments: JSON,
    output: JSON,
    duration_ms: int,
) -> None:
    """``sessionstore.claims.complete``: write the result of a claimed call into its item."""
    traced(core.complete)(
        store.table, session_id, tool_call_id, claimed, arguments, output, duration_ms
    )


def put_record(
    store: SessionStore,
    session_id: str,
    tool_call_id: str,
    tool_name: str,
    arguments: JSON,
    output: JSON,
    duration_ms: int,
    *,
    ttl: int,
) -> Outcome | None:
    """``sessionstore.claims.put_record``: record a harmless call with one PutItem."""
    return traced(core.put_record)(
        store.table, session_id, tool_call_id, tool_name, arguments, output, duration_ms, ttl=ttl
    )
