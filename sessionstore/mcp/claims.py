"""Tool-call claims: "this call is being executed" written *before* the tool runs.

``record_tool_call`` makes the record of a call exactly-once, but only after the tool has run:
two deliveries of one call (a client retry after a lost response, two clients racing, two
instances behind a load balancer) would both run the tool, and the second record would only be
refused afterwards. A claim closes that gap: one item per tool-call id, put if absent, before
the tool runs. Whoever's put lands executes; everybody else is told what happened.

The claim item lives in the session's partition with sort key ``toolrun#<id>``. The history
Query reads ``sk < "toolid#"`` and expects the metadata item first, so the claim must sort
after both: ``"toolrun#" > "toolid#" > "tool#..." > "metadata"`` (checked below at import).

The claim put travels in one ``TransactWriteItems`` with an ``Update`` of the metadata item
under a condition (live, owned by the caller, ``active``) -- a condition on a put can only see
the item it writes, and claiming on a closed or foreign session must write nothing. The Update
changes only the idle deadline (``SET idleUntil = idle + :now``): a claim keeps an idle session
alive. A transactional Update bills like the ConditionCheck it replaced (same request, 2 write
units per started KB of the metadata item). Both actions return ``ALL_OLD`` on failure, so
one failed request says why: no such session, expired, not active, or "already claimed"
together with the claim as it is. The claim carries a request token: a
retry of our own claim whose first response was lost finds its own token and carries on. The
check also compares the session's ``ttl`` with the one the claim carries (learnt once per
instance): a session re-created under the same id after TTL removed it costs a retry, never a
claim that expires with the old one. Attempts, backoff, lost responses and contention
(``TransactionConflict``, throttled cancellations) are the store's one attempt driver's
(``sessionstore.attempts``); ``ClaimToolCall`` is its plan.

Actions: ``UpdateItem`` + ``PutItem`` (the claim), ``GetItem`` (resolving a repeat) --
all within the least-privilege policy. Nothing is ever deleted: the claim shares the
session's ``ttl`` and expires with it.

Request builders are pure functions (``claim_request``, ``guard_request``, ``record_request``)
so they can be read and tested apart from ``claim`` and ``resolve``, which send them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from .. import codec, schema, telemetry
from ..attempts import RETRY, Retry, drive, gave_up
from ..clock import format_timestamp
from ..codec import JSON
from ..errors import DynamoDBError, SessionNotActive, SessionStoreError
from ..expressions import Expr, all_of, extend_idle, live_session
from ..ids import validate_id, validate_token
from ..item import live, session_from_item
from ..lifecycle import Status
from ..models import ToolCallRecord
from ..store import SessionStore
from ..tool_calls import record_from_item
from ..wire import Cancelled, ConditionFailed, item_to_wire, send, to_python

CLAIM_PREFIX = "toolrun#"
assert schema.META_SK < schema.TOOL_PREFIX < schema.GUARD_PREFIX < CLAIM_PREFIX


def claim_sk(tool_call_id: str) -> str:
    return f"{CLAIM_PREFIX}{tool_call_id}"


def call_fingerprint(tool_name: str, arguments: JSON) -> str:
    """What makes two deliveries "the same call": the tool and its arguments."""
    codec.validate(arguments, "arguments")
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


telemetry.count_as_answer(ToolCallIdReused)  # the answer to "may I run it?", not a failure


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
    """TransactWriteItems: the session is live, ours and active (its idle deadline moved on);
    the claim is absent -> put."""
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
        f"{e.n('ttl')} = {e.v(ttl)}",
    )
    absent = Expr()
    return {
        "TransactItems": [
            {
                # An Update rather than a ConditionCheck, to move the idle deadline on: the same
                # request and write units, the same ALL_OLD on a refusal.
                "Update": {
                    "TableName": table_name,
                    "Key": schema.meta_key(session_id),
                    "UpdateExpression": "SET " + extend_idle(e, now_ms // 1000),
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


class ClaimToolCall:
    """The claim as a plan for the attempt driver: ``request`` builds, ``refused`` explains.

    Its result is an ``Outcome`` (ours: run the tool) or the ``Claim`` another delivery holds,
    which ``claim`` then resolves with reads.
    """

    operation = "transact_write_items"

    def __init__(
        self,
        table_name: str,
        session_id: str,
        tool_call_id: str,
        tool_name: str,
        fingerprint: str,
        *,
        owner: str | None,
        token: str,
        lease_ms: int,
        ttl: int,
    ) -> None:
        self.table_name = table_name
        self.session_id = session_id
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.fingerprint = fingerprint
        self.owner = owner
        self.token = token
        self.lease_ms = lease_ms
        self.ttl = ttl
        self.item: dict[str, Any] = {}

    def request(self, now_ms: int) -> dict[str, Any]:
        request = claim_request(
            self.table_name,
            self.session_id,
            self.tool_call_id,
            self.tool_name,
            self.fingerprint,
            owner=self.owner,
            token=self.token,
            now_ms=now_ms,
            lease_ms=self.lease_ms,
            ttl=self.ttl,
        )
        self.item = request_item(request)
        return request

    def succeeded(self, response: dict[str, Any]) -> Outcome | Claim:
        return Outcome(State.CLAIMED, Claim.from_item(to_python(self.item) or {}))

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Outcome | Claim | Retry:
        assert isinstance(failure, Cancelled)
        meta_old, claim_old = failure.old(0), failure.old(1)
        if failure.failed(0):
            # Absent, another principal's (the same answer, on purpose) or expired.
            live(self.session_id, meta_old, self.owner, now_ms // 1000)
        if failure.failed(1) and claim_old is not None:
            existing = Claim.from_item(claim_old)
            if existing.token == self.token:  # our own earlier attempt landed; answer lost
                return Outcome(State.CLAIMED, existing)
            if existing.fingerprint != self.fingerprint:
                raise ToolCallIdReused(existing)
            return existing
        if failure.failed(0):
            assert meta_old is not None
            current = session_from_item(meta_old)
            if current.status is not Status.ACTIVE:
                raise SessionNotActive(self.session_id, current.status)
            if current.ttl != self.ttl:
                self.ttl = current.ttl  # the session was created again under this id
                return RETRY
        raise DynamoDBError("TransactionCanceledException", repr(failure.reasons))

    def maybe_landed(self) -> None:
        pass  # the claim token settles it: a refusal shows whether our put is there

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"claim of tool call {self.tool_call_id!r}", attempts)


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

    Raises ``SessionNotFound`` (also for another owner's session), ``SessionExpired``,
    ``SessionNotActive``, ``ToolCallIdReused``, ``Unavailable``. A repeat of a claimed call is
    resolved (``resolve``) even on a session closed since: its outcome is still the answer.
    """
    validate_id(session_id, "session_id")
    validate_id(tool_call_id, "tool_call_id")
    plan = ClaimToolCall(
        store.table_name,
        session_id,
        tool_call_id,
        tool_name,
        call_fingerprint(tool_name, arguments),
        owner=owner,
        token=validate_token(store.ids.token()),
        lease_ms=lease_ms,
        ttl=ttl,
    )
    result = drive(
        plan,
        lambda operation, request: _send(store, operation, request),
        store.clock,
        store.retry,
        f"claim of tool call {tool_call_id!r} of session {session_id!r}",
    )
    return result if isinstance(result, Outcome) else resolve(store, result)


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
            return Outcome(State.RECORDED, existing, record_from_item(item))
    if store.clock.now_ms() < existing.lease_until_ms:
        return Outcome(State.IN_PROGRESS, existing)
    return Outcome(State.UNKNOWN, existing)


def _get(store: SessionStore, request: dict[str, Any]) -> dict[str, Any] | None:
    return to_python(_send(store, "get_item", request).get("Item"))


def _send(store: SessionStore, operation: str, request: dict[str, Any]) -> Any:
    return send(store.client, operation, request, store.table_name, store.item_size_limit)
