"""A claim carried across the rounds of a multi-round-trip (2026-07-28) tool call.

A tool that answers ``InputRequiredResult`` has not finished, so its claim must not be completed
yet, and the next round may reach another instance: the claim cannot wait in memory. It rides
in the ``requestState`` the client sends back, inside the tool's own state, so the round that
finishes completes it.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolRequestParams, InputRequiredResult

from .. import claims, tool_calls

_ROUND_KEY = "io.sessionstore/claim"


def suspend(
    result: InputRequiredResult, claimed: claims.Claim | None, next_round: int
) -> InputRequiredResult:
    """The SDK seals ``requestState``, so the claim comes back only unaltered, from the same
    principal, for the same tool and arguments. Sealing proves the round was issued, not that
    it has not run: ``next_round`` is taken once, in the table (``round_trips.start_round``)."""
    if claimed is None:
        return result  # nothing claimed (a harmless tool): the rounds just run
    sealed = {
        "sessionId": claimed.session_id,
        "toolCallId": claimed.tool_call_id,
        "token": claimed.token,
        "ttl": claimed.ttl,
        "round": next_round,
    }
    state = json.dumps({_ROUND_KEY: sealed, "state": result.request_state})
    return result.model_copy(update={"request_state": state})


def resume(
    params: CallToolRequestParams, session_id: str, arguments: dict[str, Any]
) -> tuple[claims.Claim, int] | None:
    """Our claim and the round number from a later round's ``requestState``; the tool gets its
    own state back."""
    if params.request_state is None:
        return None
    try:
        wrapped = json.loads(params.request_state)
    except ValueError:
        return None
    if not isinstance(wrapped, dict) or not isinstance(wrapped.get(_ROUND_KEY), dict):
        return None
    sealed = wrapped[_ROUND_KEY]
    # The handler is invoked with this very params object: it must see the tool's state.
    params.request_state = wrapped.get("state")
    if sealed.get("sessionId") != session_id:
        return None  # sealed for another session: this delivery starts afresh
    claim = claims.Claim(
        session_id=session_id,
        tool_call_id=str(sealed["toolCallId"]),
        tool_name=params.name,
        fingerprint=tool_calls.fingerprint(params.name, arguments),
        token=str(sealed["token"]),
        lease_until_ms=None,
        ttl=int(sealed.get("ttl", 0)),  # 0: not sealed; the caller reads the session's
    )
    return claim, max(2, int(sealed.get("round", 2)))
