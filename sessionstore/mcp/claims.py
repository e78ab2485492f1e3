"""Tool-call claims: "this call is being executed", written *before* the tool runs.

Two deliveries of one call (a client retry after a lost response, two clients racing, two
instances behind a load balancer) must not both run the tool. The call item of
``sessionstore.tool_calls`` is put ``claimed`` first (``PutToolCall``, one guarded transaction);
whoever's put lands executes, and the tool's result is then written into the same item
(``CompleteToolCall``: one UpdateItem, on the claim's token). Every other delivery is answered
from the item its refused put returns (ALL_OLD), with no read:

======================================  =================================================
the item under the id                   answer (``State``)
======================================  =================================================
none, or expired                        ``CLAIMED``: ours, run the tool
ours (our token: a lost response)       ``CLAIMED``: ours, run the tool
another request (tool or arguments)     ``ToolCallIdReused``
recorded                                ``RECORDED``: the stored result, not run again
claimed, lease running                  ``IN_PROGRESS``: ask again later
claimed, lease over, never recorded     ``UNKNOWN``: it may or may not have run; never again
======================================  =================================================

A tool that is harmless to run twice (read-only or idempotent, by the server's own
annotations) is not claimed: its result is put once, recorded, by ``put_record`` (one PutItem).

Cost on a warm instance, small payloads: a fresh call 1 ``TransactWriteItems`` (2 + 2 WCU) and
1 ``UpdateItem`` (1 WCU); a repeat 1 request; a harmless call 1 PutItem (1 WCU). Actions:
``UpdateItem`` + ``PutItem`` -- within the least-privilege policy. Nothing is deleted: the item
shares the session's ``ttl`` and expires with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .. import codec, telemetry
from ..clock import format_timestamp
from ..codec import JSON
from ..ids import validate_id, validate_token
from ..models import ToolCallRecord
from ..store import SessionStore
from ..tool_calls import (
    CallState,
    CompleteToolCall,
    PutRecord,
    PutToolCall,
    call_item,
    check_record_size,
    record_from_item,
    recorded_fields,
    state_of,
)


def call_fingerprint(tool_name: str, arguments: JSON) -> str:
    """What makes two deliveries "the same call": the tool and its arguments."""
    codec.validate(arguments, "arguments")
    return codec.fingerprint(codec.encode(tool_name, "tool_name"), arguments)


class State(Enum):
    """Where a delivery of a tool-call id stands (the table in the module docstring)."""

    CLAIMED = "claimed"  # the claim is ours: run the tool
    RECORDED = "recorded"  # finished and recorded: return the stored result
    IN_PROGRESS = "in_progress"  # claimed by another delivery whose lease still runs
    UNKNOWN = "unknown"  # claimed, lease over, nothing recorded: it may or may not have run


@dataclass(frozen=True, slots=True)
class Claim:
    """A call item as a claim; ``token`` and ``lease_until_ms`` are None for a call recorded
    without one (a harmless tool, or ``record_tool_call``)."""

    session_id: str
    tool_call_id: str
    tool_name: str
    fingerprint: str
    token: str | None
    lease_until_ms: int | None
    ttl: int

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Claim:
        lease = item.get("leaseUntil")
        return cls(
            session_id=item["sessionId"],
            tool_call_id=item["toolCallId"],
            tool_name=item["toolName"],
            # The previous release's records have none; one can hold an id containing "#".
            fingerprint=item.get("fingerprint", ""),
            token=item.get("claimToken"),
            lease_until_ms=None if lease is None else int(lease),
            ttl=int(item["ttl"]),
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer to "may I run this call?": ``state`` and what goes with it."""

    state: State
    claim: Claim
    record: ToolCallRecord | None = None


class ToolCallIdReused(Exception):
    """The tool-call id is already taken by a call with another tool name or arguments."""

    def __init__(self, claim: Claim) -> None:
        super().__init__(
            f"tool call {claim.tool_call_id!r} of session {claim.session_id!r} was first made "
            f"with tool {claim.tool_name!r} and other arguments"
        )
        self.claim = claim


telemetry.count_as_answer(ToolCallIdReused)  # the answer to "may I run it?", not a failure


def answer(existing: Mapping[str, Any], fingerprint: str, token: str, now_ms: int) -> Outcome:
    """What the item holding the id (python-typed, live) says to a delivery with ``token``."""
    held = Claim.from_item(existing)
    if held.token == token:
        return Outcome(State.CLAIMED, held)  # our own put landed; its response was lost
    if held.fingerprint != fingerprint:
        raise ToolCallIdReused(held)
    if state_of(existing) is CallState.RECORDED:
        return Outcome(State.RECORDED, held, record_from_item(existing))
    if held.lease_until_ms is not None and now_ms < held.lease_until_ms:
        return Outcome(State.IN_PROGRESS, held)
    return Outcome(State.UNKNOWN, held)


def _result_fields(arguments: JSON, output: JSON, duration_ms: int, at: str) -> dict[str, Any]:
    """What a call's result adds to its item, the texts encoded and checked."""
    return recorded_fields(
        codec.encode(arguments, "input"), codec.encode(output, "output"), duration_ms, at
    )


@telemetry.traced("claim_tool_call")
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
    """Claim ``tool_call_id`` for one execution, or say why not (blocking; one request).

    ``ttl`` is the session's, as this instance knows it (a stale one costs a retry). Raises
    ``SessionNotFound`` (also for another owner's session), ``SessionExpired``,
    ``SessionNotActive``, ``ToolCallIdReused``, ``Unavailable``. A repeat is answered even on a
    session closed since: its outcome is still the answer.
    """
    validate_id(session_id, "session_id")
    validate_id(tool_call_id, "tool_call_id")
    fingerprint = call_fingerprint(tool_name, arguments)
    token = validate_token(store.ids.token())
    now_ms = store.clock.now_ms()
    item = {
        **call_item(
            session_id, tool_call_id, tool_name, fingerprint, format_timestamp(now_ms), ttl
        ),
        "state": CallState.CLAIMED.value,
        "claimToken": token,
        "leaseUntil": now_ms + lease_ms,
    }
    plan = PutToolCall(store.table_name, session_id, owner, item, True, lambda _: None)
    put = store._drive(plan, f"claim of tool call {tool_call_id!r} of session {session_id!r}")
    if put.existing is None:
        return Outcome(State.CLAIMED, Claim.from_item(item))  # item["ttl"]: as it landed
    return answer(put.existing, fingerprint, token, store.clock.now_ms())


@telemetry.traced("complete_tool_call")
def complete(
    store: SessionStore,
    session_id: str,
    tool_call_id: str,
    claimed: Claim,
    arguments: JSON,
    output: JSON,
    duration_ms: int,
) -> None:
    """Write the result of a call this delivery claimed into its item (one UpdateItem).

    Raises ``ItemTooLarge`` before sending when the recorded item would exceed the item size
    limit; ``SessionExpired`` when the item is gone (the session's time ran out while the tool
    ran), also when the id was taken again after the claim expired.
    """
    same_call = (claimed.session_id, claimed.tool_call_id) == (session_id, tool_call_id)
    if claimed.token is None or not same_call:
        raise ValueError("complete needs this call's claim, with its token")
    at = format_timestamp(store.clock.now_ms())
    fields = _result_fields(arguments, output, duration_ms, at)
    held = call_item(
        session_id, tool_call_id, claimed.tool_name, claimed.fingerprint, at, claimed.ttl
    )
    check_record_size({**held, **fields, "claimToken": claimed.token}, store.item_size_limit)
    plan = CompleteToolCall(
        store.table_name, session_id, tool_call_id, claimed.token, claimed.ttl, fields
    )
    store._drive(plan, f"completion of tool call {tool_call_id!r}")


@telemetry.traced("record_tool_call")
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
    """Record a harmless call (no claim) with one PutItem, the session read just before.

    None when this put stored it; otherwise the ``Outcome`` the item under the id gives (a
    different request raises ``ToolCallIdReused``)."""
    fingerprint = call_fingerprint(tool_name, arguments)
    at = format_timestamp(store.clock.now_ms())
    item = {
        **call_item(session_id, tool_call_id, tool_name, fingerprint, at, ttl),
        **_result_fields(arguments, output, duration_ms, at),
    }
    check_record_size(item, store.item_size_limit)
    put = store._drive(PutRecord(store.table_name, item), f"record of tool call {tool_call_id!r}")
    if put.existing is None:
        return None
    return answer(put.existing, fingerprint, "", store.clock.now_ms())
