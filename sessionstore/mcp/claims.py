"""Tool-call claims: "this call is being executed" written *before* the tool runs.

``record_tool_call`` makes the record of a call exactly-once, but only after the tool has run:
two deliveries of one call (a client retry after a lost response, two clients racing, two
instances behind a load balancer) would both run the tool, and the second record would only be
refused afterwards. A claim closes that gap: one item per tool-call id, put if absent, before
the tool runs. Whoever's put lands executes; everybody else is told what happened.

The claim item lives in the session's partition with sort key ``toolrun#<id>``. The history
Query reads ``sk < "toolid#"`` and expects the metadata item first, so the claim must sort
after both: ``"toolrun#" > "toolid#" > "tool#..." > "metadata"`` (checked below at import).

The claim put travels in one ``TransactWriteItems`` with a ``ConditionCheck`` on the metadata
item (live, owned by the caller, ``active``) -- a condition on a put can only see the item it
writes, and claiming on a closed or foreign session must write nothing. Both actions return
``ALL_OLD`` on failure, so one failed request says why: no such session, expired, not active,
or "already claimed" together with the claim as it is. The claim carries a request token: a
retry of our own claim whose first response was lost finds its own token and carries on.

Actions: ``ConditionCheckItem`` + ``PutItem`` (the claim), ``GetItem`` (resolving a repeat) --
all within the least-privilege policy. Nothing is ever deleted: the claim shares the
session's ``ttl`` and expires with it.

Request builders are pure functions (``claim_request``, ``guard_request``, ``record_request``)
so they can be read and tested apart from ``claim`` and ``resolve``, which send them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from .. import codec, schema, sizing
from ..clock import format_timestamp
from ..codec import JSON
from ..errors import (
    DynamoDBError,
    SessionExpired,
    SessionNotActive,
    SessionNotFound,
    TableNotFound,
    Unavailable,
)
from ..expressions import Expr, all_of, live_session
from ..ids import validate_id
from ..models import ToolCallRecord
from ..status import Status
from ..store import SessionStore
from ..wire import item_to_wire, send, to_python

CLAIM_PREFIX = "toolrun#"
assert schema.META_SK < schema.TOOL_PREFIX < schema.GUARD_PREFIX < CLAIM_PREFIX

#: Attempts for one claim when DynamoDB is unreachable or a concurrent transaction collides;
#: the claim's token makes re-sending safe.
CLAIM_ATTEMPTS = 3

_UNAVAILABLE_CODES = {
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
}


def claim_sk(tool_call_id: str) -> str:
    return f"{CLAIM_PREFIX}{tool_call_id}"


def call_fingerprint(tool_name: str, arguments: JSON) -> str:
    """What makes two deliveries "the same call": the tool and its arguments."""
    return codec.fingerprint(codec.encode(tool_name, "tool_name"), arguments)


class State(Enum):
    """Where a repeated tool-call id stands."""

    CLAIMED = "claimed"  # the claim is ours: run the tool
    RECORDED = "recorded"  # finished and recorded: return the stored result
    IN_PROGRESS = "in_progress"  # claimed by another delivery whose lease still runs
    UNKNOWN = "unknown"  # claimed, lease over, nothing recorded: it may or may not have run


@dataclass(frozen=True)
class Claim:
    session_id: str
    tool_call_id: str
    tool_name: str
    fingerprint: str
    token: str
    lease_until_ms: int
    ttl: int

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Claim:
        return cls(
            session_id=item["sessionId"],
            tool_call_id=item["toolCallId"],
            tool_name=item["toolName"],
            fingerprint=item["fingerprint"],
            token=item["claimToken"],
            lease_until_ms=int(item["leaseUntil"]),
            ttl=int(item["ttl"]),
        )


@dataclass(frozen=True)
class Outcome:
    """The answer to "may I run this call?": ``state`` and what goes with it."""

    state: State
    claim: Claim
    record: ToolCallRecord | None = None


class ToolCallIdReused(Exception):
    """The tool-call id is already claimed by a call with another tool name or arguments."""

    def __init__(self, claim: Claim) -> None:
        super().__init__(
            f"tool call {claim.tool_call_id!r} of session {claim.session_id!r} was first made "
            f"with tool {claim.tool_name!r} and other arguments"
        )
        self.claim = claim


# ---------------------------------------------------------------------------- request builders


def claim_request(
    table_name: str,
    session_id: str,
    tool_call_id: str,
    tool_name: str,
    fingerprint: str,
    *,
    owner: str | None,
    token: str,
    now_ms: int,
    lease_ms: int,
    ttl: int,
) -> dict[str, Any]:
    """TransactWriteItems: the session is live, ours and active; the claim is absent -> put."""
    item = {
        "pk": schema.pk(session_id),
        "sk": claim_sk(tool_call_id),
        "sessionId": session_id,
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "fingerprint": fingerprint,
        "claimToken": token,
        "claimedAt": format_timestamp(now_ms),
        "leaseUntil": now_ms + lease_ms,
        "ttl": ttl,
    }
    e = Expr()
    check = all_of(
        live_session(e, owner=owner, now_s=now_ms // 1000),
        f"{e.n('status')} = {e.v(Status.ACTIVE.value)}",
    )
    absent = Expr()
    return {
        "TransactItems": [
            {
                "ConditionCheck": {
                    "TableName": table_name,
                    "Key": schema.meta_key(session_id),
                    "ConditionExpression": check,
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    **e.params(),
                }
            },
            {
                "Put": {
                    "TableName": table_name,
                    "Item": item_to_wire(item),
                    "ConditionExpression": f"attribute_not_exists({absent.n('pk')})",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    **absent.params(),
                }
            },
        ]
    }


def guard_request(table_name: str, session_id: str, tool_call_id: str) -> dict[str, Any]:
    """GetItem of the store's guard item ``toolid#<id>``: present once the call is recorded."""
    return {
        "TableName": table_name,
        "Key": {"pk": {"S": schema.pk(session_id)}, "sk": {"S": schema.guard_sk(tool_call_id)}},
        "ConsistentRead": True,
    }


def record_request(table_name: str, session_id: str, record_sk: str) -> dict[str, Any]:
    return {
        "TableName": table_name,
        "Key": {"pk": {"S": schema.pk(session_id)}, "sk": {"S": record_sk}},
        "ConsistentRead": True,
    }


# ---------------------------------------------------------------------------- sending


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

    Raises ``SessionNotFound`` (also for another owner's session), ``SessionExpired``,
    ``SessionNotActive``, ``ToolCallIdReused``, ``Unavailable``. A repeat of a claimed call is
    resolved (``resolve``) even on a session closed since: its outcome is still the answer.
    """
    validate_id(session_id, "session_id")
    validate_id(tool_call_id, "tool_call_id")
    fingerprint = call_fingerprint(tool_name, arguments)
    token = store.ids.token()
    for attempt in range(CLAIM_ATTEMPTS):
        now_ms = store.clock.now_ms()
        request = claim_request(
            store.table_name,
            session_id,
            tool_call_id,
            tool_name,
            fingerprint,
            owner=owner,
            token=token,
            now_ms=now_ms,
            lease_ms=lease_ms,
            ttl=ttl,
        )
        try:
            _transact(store.client, request, store.table_name)
        except _Cancelled as cancelled:
            meta_old, claim_old = cancelled.old(0), cancelled.old(1)
            if cancelled.failed(0):
                if meta_old is None or meta_old.get("owner") != owner:
                    raise SessionNotFound(session_id) from None  # foreign == absent, on purpose
                if int(meta_old["ttl"]) <= now_ms // 1000:
                    raise SessionExpired(session_id, int(meta_old["ttl"])) from None
            if cancelled.failed(1) and claim_old is not None:
                existing = Claim.from_item(claim_old)
                if existing.token == token:  # our own earlier attempt landed; its answer was lost
                    return Outcome(State.CLAIMED, existing)
                if existing.fingerprint != fingerprint:
                    raise ToolCallIdReused(existing) from None
                return resolve(store, existing)
            if cancelled.failed(0) and meta_old is not None:
                raise SessionNotActive(session_id, Status(meta_old["status"])) from None
            if not cancelled.conflict or attempt + 1 == CLAIM_ATTEMPTS:
                raise DynamoDBError(
                    "TransactionCanceledException", repr(cancelled.reasons)
                ) from None
            store.retry.backoff(attempt)  # a concurrent transaction on these items: try again
        except Unavailable:
            if attempt + 1 == CLAIM_ATTEMPTS:
                raise
            store.retry.backoff(attempt)
        else:
            return Outcome(State.CLAIMED, Claim.from_item(to_python(request_item(request)) or {}))
    raise AssertionError("unreachable")  # pragma: no cover


def request_item(request: dict[str, Any]) -> dict[str, Any]:
    """The claim item (wire form) inside a ``claim_request``."""
    item: dict[str, Any] = request["TransactItems"][1]["Put"]["Item"]
    return item


def resolve(store: SessionStore, existing: Claim) -> Outcome:
    """Someone else holds the claim: recorded (stored result), still running, or unknown."""
    guard = _get(store, guard_request(store.table_name, existing.session_id, existing.tool_call_id))
    if guard is not None:
        item = _get(store, record_request(store.table_name, existing.session_id, guard["recordSk"]))
        if item is not None:
            return Outcome(State.RECORDED, existing, ToolCallRecord.from_item(item))
    if store.clock.now_ms() < existing.lease_until_ms:
        return Outcome(State.IN_PROGRESS, existing)
    return Outcome(State.UNKNOWN, existing)


def _get(store: SessionStore, request: dict[str, Any]) -> dict[str, Any] | None:
    response = send(store.client, "get_item", request, store.table_name, sizing.MAX_ITEM_BYTES)
    return to_python(response.get("Item"))


class _Cancelled(Exception):
    """A cancelled transaction: one reason per action, in order (ALL_OLD items included)."""

    def __init__(self, reasons: list[dict[str, Any]]) -> None:
        self.reasons = reasons
        self.conflict = any(r.get("Code") == "TransactionConflict" for r in reasons)

    def failed(self, index: int) -> bool:
        return index < len(self.reasons) and (
            self.reasons[index].get("Code") == "ConditionalCheckFailed"
        )

    def old(self, index: int) -> dict[str, Any] | None:
        return to_python(self.reasons[index].get("Item")) if index < len(self.reasons) else None


def _transact(client: Any, request: dict[str, Any], table_name: str) -> None:
    """Send one TransactWriteItems; a cancellation comes back with its reasons.

    Translated here rather than through the store's transport helpers, whose transaction
    internals are theirs to change: only the public errors leave this function.
    """
    try:
        client.transact_write_items(**request)
    except ClientError as exc:
        response: dict[str, Any] = dict(exc.response)
        error: dict[str, Any] = response.get("Error", {})
        code, message = error.get("Code", ""), error.get("Message", "")
        if code == "TransactionCanceledException":
            raise _Cancelled(list(response.get("CancellationReasons", []))) from exc
        if code in _UNAVAILABLE_CODES:
            # The claim's token settles a re-send either way; "maybe" is the honest answer.
            raise Unavailable(
                f"DynamoDB {code} after retries: {message}", maybe_applied=True
            ) from exc
        if code == "ResourceNotFoundException":
            raise TableNotFound(f"table {table_name!r} not found: {message}") from exc
        raise DynamoDBError(code, message) from exc
    except (BotoConnectionError, HTTPClientError) as exc:
        raise Unavailable(f"DynamoDB unreachable after retries: {exc}", maybe_applied=True) from exc
