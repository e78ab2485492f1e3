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
claimed, asking the client for input    ``SUSPENDED``: the round's stored answer again
claimed, lease running                  ``IN_PROGRESS``: ask again later
claimed, lease over, never recorded     ``UNKNOWN``: it may or may not have run; never again
======================================  =================================================

A multi-round-trip call (a tool answering ``InputRequiredResult``) keeps its claim across
rounds (``rounds``): each later round is taken once (``start_round``), and a round that asks
the client for input leaves that answer in the item (``suspend_round``), so a round re-sent
after a lost response gets it again instead of running again.

A tool that is harmless to run twice (read-only or idempotent, by the server's own
annotations) is not claimed: its result is put once, recorded, by ``put_record`` (one PutItem).

Cost on a warm instance, small payloads: a fresh call 1 ``TransactWriteItems`` (2 + 2 WCU) and
1 ``UpdateItem`` (1 WCU); a repeat 1 request; a harmless call 1 PutItem (1 WCU). Actions:
``UpdateItem`` + ``PutItem`` -- within the least-privilege policy. Nothing is deleted: the item
shares the session's ``ttl`` and expires with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .. import codec, sizing, telemetry
from ..clock import format_timestamp
from ..codec import JSON
from ..errors import ItemTooLarge, SessionExpired
from ..ids import validate_id, validate_token
from ..models import ToolCallRecord
from ..store import SessionStore
from ..tool_calls import (
    CLAIM_FIELDS,
    MAX_SUSPENDED_BYTES,
    CallState,
    CompleteToolCall,
    Put,
    PutRecord,
    PutToolCall,
    StartRound,
    SuspendRound,
    call_item,
    fits,
    record_from_item,
    recorded_fields,
    state_of,
    suspended_answer,
)


def call_fingerprint(tool_name: str, arguments: JSON) -> str:
    """What makes two deliveries "the same call": the tool and its arguments."""
    codec.validate(arguments, "arguments")
    return codec.fingerprint(codec.encode(tool_name, "tool_name"), arguments)


class State(Enum):
    """Where a delivery of a tool-call id stands (the table in the module docstring)."""

    CLAIMED = "claimed"  # the claim is ours: run the tool
    RECORDED = "recorded"  # finished and recorded: return the stored result
    SUSPENDED = "suspended"  # the round asked the client for input: that answer again
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
    suspended: str | None = None  # ``SUSPENDED``: the round's answer (JSON text)


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
    return _standing(existing, held, 1, now_ms)


def _standing(existing: Mapping[str, Any], held: Claim, round_number: int, now_ms: int) -> Outcome:
    """Where the call in ``existing`` stands for a delivery of round ``round_number`` that may
    not run: finished, suspended after that very round, running, or of unknown outcome."""
    if state_of(existing) is CallState.RECORDED:
        return Outcome(State.RECORDED, held, record_from_item(existing))
    answer = suspended_answer(existing, round_number)
    if answer is not None:
        return Outcome(State.SUSPENDED, held, suspended=answer)
    if held.lease_until_ms is not None and now_ms < held.lease_until_ms:
        return Outcome(State.IN_PROGRESS, held)
    return Outcome(State.UNKNOWN, held)


def _fitted_forms(
    held: Mapping[str, Any],
    arguments: JSON,
    output: JSON,
    duration_ms: int,
    at: str,
    limit: int,
) -> list[dict[str, Any]]:
    """What a call's result adds to its item ``held``, in the forms that fit the item size
    limit as measured, the fullest first (the last always fits).

    A repeat is answered from the fingerprint and the output, never from the input, so the
    input goes first: past the limit it is kept as ``{"tooLarge": {"bytes": N}}``; then the
    output likewise (that result is delivered this once; a repeat is told it was too large to
    keep). The smallest form always fits, so the tool's run is never lost to its size -- and a
    call is never refused for arguments the SDK accepted."""
    input_text = codec.encode(arguments, "input")
    output_text = codec.encode(output, "output")
    forms = (
        (input_text, output_text),
        (_too_large(input_text), output_text),
        (_too_large(input_text), _too_large(output_text)),
    )
    fitting = [recorded_fields(i, o, duration_ms, at) for i, o in forms]
    fitting = [fields for fields in fitting if fits({**held, **fields}, limit)]
    assert fitting, "a record without its input and output always fits"
    return fitting


def _write_fitted(forms: list[dict[str, Any]], plan: Callable[[dict[str, Any]], Any]) -> Any:
    """Drive the plan of the fullest form; an engine that still finds it too large (its own
    count, a field we did not foresee) gets the next one."""
    for fields in forms[:-1]:
        try:
            return plan(fields)
        except ItemTooLarge:
            continue
    return plan(forms[-1])


def _too_large(text: str) -> str:
    return codec.encode({"tooLarge": {"bytes": sizing.text_size(text)}}, "")


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


@telemetry.traced("start_round")
def start_round(
    store: SessionStore, claimed: Claim, round_number: int, *, lease_ms: int
) -> Outcome:
    """Take round ``round_number`` (2, 3, ...) of the multi-round-trip call ``claimed`` holds,
    or say why not (blocking; one UpdateItem, ``tool_calls.StartRound``): a round runs at most
    once, whatever is re-sent. A round already taken is answered like a repeat of the call:
    ``RECORDED`` once the call finished (the stored result), ``SUSPENDED`` when that round asked
    the client for input (its answer again), ``IN_PROGRESS`` while another delivery's lease
    runs, ``UNKNOWN`` after. ``SessionExpired`` when the item is gone, past its ttl or holds
    another claim (the session's time ran out, and the id was taken again)."""
    if claimed.token is None or round_number < 2:
        raise ValueError("a later round needs its call's claim, with its token")
    delivery = validate_token(store.ids.token())
    plan = StartRound(
        store.table_name,
        claimed.session_id,
        claimed.tool_call_id,
        claimed.token,
        round_number,
        delivery,
        lease_ms,
    )
    what = f"round {round_number} of tool call {claimed.tool_call_id!r}"
    put = store._drive(plan, what)
    if put.existing is None:
        return Outcome(State.CLAIMED, claimed)
    existing = put.existing
    now_ms = store.clock.now_ms()
    if (
        not existing
        or existing.get("claimToken") != claimed.token
        or int(existing["ttl"]) <= now_ms // 1000
    ):
        raise SessionExpired(claimed.session_id, claimed.ttl)
    return _standing(existing, Claim.from_item(existing), round_number, now_ms)


@telemetry.traced("suspend_round")
def suspend_round(store: SessionStore, claimed: Claim, round_number: int, answer: str) -> None:
    """Keep round ``round_number``'s ``InputRequiredResult`` (JSON text) in the call item, for a
    re-sent round (one UpdateItem, ``tool_calls.SuspendRound``); one too large to keep
    (``MAX_SUSPENDED_BYTES``) is not sent."""
    if claimed.token is None or sizing.text_size(answer) > MAX_SUSPENDED_BYTES:
        return
    plan = SuspendRound(
        store.table_name,
        claimed.session_id,
        claimed.tool_call_id,
        claimed.token,
        round_number,
        answer,
    )
    store._drive(plan, f"suspension of tool call {claimed.tool_call_id!r}")


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
    """Write the result of a call this delivery claimed into its item (one UpdateItem); an
    input or output too large to keep is kept as its size (``_fitted_fields``).

    Raises ``SessionExpired`` when the item is gone (the session's time ran out while the tool
    ran), also when the id was taken again after the claim expired.
    """
    same_call = (claimed.session_id, claimed.tool_call_id) == (session_id, tool_call_id)
    if claimed.token is None or not same_call:
        raise ValueError("complete needs this call's claim, with its token")
    at = format_timestamp(store.clock.now_ms())
    held = call_item(
        session_id, tool_call_id, claimed.tool_name, claimed.fingerprint, at, claimed.ttl
    )
    forms = _fitted_forms(
        {**held, **CLAIM_FIELDS}, arguments, output, duration_ms, at, store.item_size_limit
    )
    token = claimed.token

    def write(fields: dict[str, Any]) -> None:
        plan = CompleteToolCall(
            store.table_name, session_id, tool_call_id, token, claimed.ttl, fields
        )
        store._drive(plan, f"completion of tool call {tool_call_id!r}")

    _write_fitted(forms, write)


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
    held = call_item(session_id, tool_call_id, tool_name, fingerprint, at, ttl)
    forms = _fitted_forms(held, arguments, output, duration_ms, at, store.item_size_limit)

    def write(fields: dict[str, Any]) -> Put:
        plan = PutRecord(store.table_name, {**held, **fields})
        return store._drive(plan, f"record of tool call {tool_call_id!r}")

    put = _write_fitted(forms, write)
    if put.existing is None:
        return None
    return answer(put.existing, fingerprint, "", store.clock.now_ms())
