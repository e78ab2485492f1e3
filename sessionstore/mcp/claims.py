"""Tool-call claims over a ``SessionStore``: the operations of ``sessionstore.claims`` (where
the claims are written and answered) run over the store's ``backend`` and ``memory``, for code
that holds a store -- a server of its own, a notebook, a test. The extension
(``middleware``) calls ``sessionstore.claims`` itself.
"""

from __future__ import annotations

from .. import claims as core
from ..claims import Claim, Outcome, State, answer, call_fingerprint
from ..codec import JSON
from ..store import SessionStore

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
    return core.claim(
        store.backend,
        store.memory,
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
    """``sessionstore.claims.start_round``: take a later round of a call, once."""
    return core.start_round(store.backend, store.memory, claimed, round_number, lease_ms=lease_ms)


def suspend_round(store: SessionStore, claimed: Claim, round_number: int, answer_json: str) -> None:
    """``sessionstore.claims.suspend_round``: keep a round's answer for a re-sent round."""
    core.suspend_round(store.backend, store.memory, claimed, round_number, answer_json)


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
    b, m = store.backend, store.memory
    core.complete(b, m, session_id, tool_call_id, claimed, arguments, output, duration_ms)


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
    b, m = store.backend, store.memory
    return core.put_record(
        b, m, session_id, tool_call_id, tool_name, arguments, output, duration_ms, ttl=ttl
    )
