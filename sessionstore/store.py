"""SessionStore: the session lifecycle on a few DynamoDB primitives.

Every write is one request on the happy path, and each conflict retry is one more: a failed
condition returns the current item (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), which is
all we need to tell "not found" from "expired" from "wrong status" from "stale version" -- and
whether our own earlier attempt had in fact landed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from . import codec, schema, sizing
from .clock import Clock, SystemClock, format_timestamp
from .codec import JSON
from .errors import (
    ConflictRetriesExhausted,
    DynamoDBError,
    InvalidInput,
    InvalidTransition,
    ItemTooLarge,
    SessionAlreadyExists,
    SessionExpired,
    SessionNotActive,
    SessionNotFound,
    ToolCallConflict,
    Unavailable,
    VersionConflict,
)
from .expressions import Expr, all_of, live_session, status_in
from .ids import IdFactory, RandomIds, validate_id
from .models import Session, ToolCallRecord
from .retry import RetryPolicy
from .status import Status, allowed, sources
from .wire import (
    Cancelled,
    ConditionFailed,
    Settle,
    item_to_wire,
    send,
    to_python,
    watch_attempt,
)

_MAX_TTL_SECONDS = 366 * 86400 * 10  # ten years: anything longer is a units mistake
class _Seen(NamedTuple):
    version: int
    context_bytes: int
    ttl: int
    owner: str | None


def _tx_attribute(status: Status) -> str:
    """Where a transition into ``status`` leaves its request token. The lifecycle has no
    cycles, so each status is entered at most once and its token is never overwritten."""
    return f"tx_{status.value}"


def _max_metadata_overhead() -> int:
    """The most bytes the metadata item can hold besides its context messages."""
    widest = {
        "pk": schema.pk("x" * 128),
        "sk": schema.META_SK,
        "sessionId": "x" * 128,
        "version": 10**20,
        "status": Status.INITIALIZING.value,
        "owner": "x" * 128,
        "createdAt": "x" * 24,
        "updatedAt": "x" * 24,
        "ttl": 10**11,
        "context": [],
        "contextBytes": 10**7,
        "createToken": "x" * 32,
        **{_tx_attribute(s): "x" * 32 for s in Status},
        **{schema.ring_slot(i): "x" * 32 for i in range(schema.RING_SIZE)},
    }
    return sizing.item_size(item_to_wire(widest)) - sizing.value_size({"L": []})


#: Bytes reserved in every metadata item for everything but the context list.
METADATA_OVERHEAD = _max_metadata_overhead()


class SessionStore:
    """Sessions, their context and their tool-call history in one DynamoDB table.

    ``client`` is a boto3 DynamoDB client (see ``sessionstore.connect``); ``clock`` and ``ids``
    are injected so notebooks and tests are deterministic; ``retry`` bounds the backoff on
    version conflicts (botocore's own retry mode handles throttling and network faults).
    """

    def __init__(
        self,
        client: Any,
        table_name: str = "mcp-sessions",
        *,
        clock: Clock | None = None,
        ids: IdFactory | None = None,
        retry: RetryPolicy | None = None,
        item_size_limit: int = sizing.MAX_ITEM_BYTES,
    ) -> None:
        if not METADATA_OVERHEAD < item_size_limit <= sizing.MAX_ITEM_BYTES:
            raise InvalidInput(
                f"item_size_limit must be in ({METADATA_OVERHEAD}, {sizing.MAX_ITEM_BYTES}]"
            )
        self.client = client
        client.meta.events.register(
            "needs-retry.dynamodb", watch_attempt, unique_id="sessionstore.watch-attempt"
        )
        self.table_name = table_name
        self.clock: Clock = clock or SystemClock()
        self.ids: IdFactory = ids or RandomIds()
        self.retry = retry or RetryPolicy()
        self.item_size_limit = item_size_limit
        # A hint, never the truth: the last version this instance saw per session, so the first
        # attempt of a read-modify-write can skip the read. A stale hint costs one retry.
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._seen_lock = threading.Lock()

    # ------------------------------------------------------------------ table

    def create_table(self, *, wait: bool = True) -> bool:
        """Create the table if missing (idempotent); True if this call created it."""
        return schema.create_table(self.client, self.table_name, wait=wait)

    # ------------------------------------------------------------------ sessions

    def create_session(
        self,
        session_id: str | None = None,
        *,
        owner: str | None = None,
        ttl_seconds: int = 86400,
    ) -> Session:
        session_id = self.ids.session_id() if session_id is None else session_id
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        _validate_ttl(ttl_seconds)
        now_ms = self.clock.now_ms()
        stamp = format_timestamp(now_ms)
        token = self.ids.token()
        item: dict[str, Any] = {
            "pk": schema.pk(session_id),
            "sk": schema.META_SK,
            "sessionId": session_id,
            "version": 1,
            "status": Status.INITIALIZING.value,
            "createdAt": stamp,
            "updatedAt": stamp,
            "ttl": now_ms // 1000 + ttl_seconds,
            "context": [],
            "contextBytes": sizing.value_size({"L": []}),
            "createToken": token,
        }
        if owner is not None:
            item["owner"] = owner
        e = Expr()
        request = {
            "TableName": self.table_name,
            "Item": item_to_wire(item),
            "ConditionExpression": f"attribute_not_exists({e.n('pk')})",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.params(),
        }
        settle = Settle()
        for attempt in range(self.retry.max_attempts):
            try:
                self._call("put_item", request)
                break
            except ConditionFailed as failed:
                if failed.old is not None and failed.old.get("createToken") == token:
                    break  # our own earlier attempt landed; its response was lost
                raise SessionAlreadyExists(session_id) from None
            except Unavailable as exc:
                settle.absorb(exc)
                self.retry.backoff(attempt)
        session = Session.from_item(item)
        self._remember(session)
        return session

    def get_session(self, session_id: str, *, owner: str | None = None) -> Session:
        """Strongly consistent read of the metadata item."""
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        response = self._call(
            "get_item",
            {
                "TableName": self.table_name,
                "Key": schema.meta_key(session_id),
                "ConsistentRead": True,
            },
        )
        item = to_python(response.get("Item"))
        session = self._live(session_id, item, owner, self.clock.now_ms() // 1000)
        self._remember(session)
        return session

    # ------------------------------------------------------------------ lifecycle

    def transition(self, session_id: str, to: Status, *, owner: str | None = None) -> Session:
        """Move the session to ``to`` if the lifecycle table allows it, in one request.

        The allowed source statuses are part of the condition, so no read is needed; on a
        failure the returned old item says why. Asking for the current status is a no-op.
        """
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        if not isinstance(to, Status):
            raise InvalidInput(f"to must be a Status, not {to!r}")
        token = self.ids.token()
        froms = [s.value for s in sources(to)]
        settle = Settle()
        for attempt in range(self.retry.max_attempts):
            now_ms = self.clock.now_ms()
            e = Expr()
            guard = live_session(e, owner=owner, now_s=now_ms // 1000)
            if froms:
                condition = all_of(guard, status_in(e, froms))
            else:  # nothing leads here: let the failure report the current status
                condition = all_of(guard, f"attribute_not_exists({e.n('pk')})")
            request = {
                "TableName": self.table_name,
                "Key": schema.meta_key(session_id),
                "UpdateExpression": (
                    f"SET {e.n('status')} = {e.v(to.value)}, "
                    f"{e.n('updatedAt')} = {e.v(format_timestamp(now_ms))}, "
                    f"{e.n(_tx_attribute(to))} = {e.v(token)} "
                    f"ADD {e.n('version')} {e.v(1)}"
                ),
                "ConditionExpression": condition,
                "ReturnValues": "ALL_NEW",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                **e.params(),
            }
            try:
                return self._session_from(self._call("update_item", request)["Attributes"])
            except ConditionFailed as failed:
                old = failed.old
                if old is not None and old.get(_tx_attribute(to)) == token:
                    return self._session_from_python(old)  # our lost attempt had landed
                current = self._live(session_id, old, owner, now_ms // 1000)
                if current.status is to:
                    return current  # already there: idempotent success, nothing written
                raise InvalidTransition(session_id, current.status, to) from None
            except Unavailable as exc:
                settle.absorb(exc)
                self.retry.backoff(attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def activate(self, session_id: str, *, owner: str | None = None) -> Session:
        return self.transition(session_id, Status.ACTIVE, owner=owner)

    def begin_close(self, session_id: str, *, owner: str | None = None) -> Session:
        return self.transition(session_id, Status.CLOSING, owner=owner)

    def close(self, session_id: str, *, owner: str | None = None) -> Session:
        return self.transition(session_id, Status.CLOSED, owner=owner)

    def update_status(
        self, session_id: str, status: Status, *, owner: str | None = None
    ) -> Session:
        """The source design's optimistic read-modify-write, done right.

        The version condition and the increment travel in one request; a conflict is retried
        with the version from ALL_OLD (one request per retry, never a re-read), with exponential
        backoff and full jitter, up to ``retry.max_attempts``. The move is checked against the
        lifecycle table on the item as read, and again by the condition.
        """
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        if not isinstance(status, Status):
            raise InvalidInput(f"status must be a Status, not {status!r}")
        froms = [s.value for s in sources(status)]

        def judge(current: Session) -> Session | None:
            if current.status is status:
                return current
            if not allowed(current.status, status):
                raise InvalidTransition(session_id, current.status, status)
            return None

        def change(e: Expr) -> tuple[str, str]:
            cond = status_in(e, froms) if froms else f"attribute_not_exists({e.n('pk')})"
            return f"{e.n('status')} = {e.v(status.value)}", cond

        return self._versioned(session_id, owner, None, change, judge)

    # ------------------------------------------------------------------ context

    def append_context(
        self,
        session_id: str,
        messages: Sequence[JSON],
        *,
        expected_version: int | None = None,
        owner: str | None = None,
    ) -> Session:
        """Append ``messages`` to the context list of an active session, atomically.

        ``SET context = list_append(...)`` in one request; the version goes up by one. Without
        ``expected_version`` a version conflict is retried (appends commute); with it, a conflict
        raises ``VersionConflict(current=...)``. Raises ``ItemTooLarge`` before anything is
        written when the item could pass ``item_size_limit``.
        """
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise InvalidInput("messages must be a list of JSON values")
        if not messages:
            raise InvalidInput("messages must not be empty")
        if expected_version is not None and (
            isinstance(expected_version, bool)
            or not isinstance(expected_version, int)
            or expected_version < 1
        ):
            raise InvalidInput("expected_version must be a positive int")
        encoded = [codec.encode(m, f"messages[{i}]") for i, m in enumerate(messages)]
        added = sum(len(t.encode("utf-8")) + 1 for t in encoded)  # +1: list element overhead
        # The server-side guard is on ``contextBytes`` (the context list's own size) plus a
        # reserve for every other attribute at its widest, so "current" below is that bound.
        budget = self.item_size_limit - METADATA_OVERHEAD
        seen = self._seen_entry(session_id, owner)
        known_bytes = seen.context_bytes if seen else sizing.value_size({"L": []})
        if known_bytes + added > budget:
            raise ItemTooLarge(METADATA_OVERHEAD + known_bytes, added, self.item_size_limit)

        def judge(current: Session) -> Session | None:
            if current.status is not Status.ACTIVE:
                raise SessionNotActive(session_id, current.status)
            if current.context_bytes + added > budget:
                raise ItemTooLarge(
                    METADATA_OVERHEAD + current.context_bytes, added, self.item_size_limit
                )
            return None

        def change(e: Expr) -> tuple[str, str]:
            update = (
                f"{e.n('context')} = list_append(if_not_exists({e.n('context')}, {e.v([])}), "
                f"{e.v(encoded)}), {e.n('contextBytes')} = {e.n('contextBytes')} + {e.v(added)}"
            )
            cond = all_of(
                f"{e.n('status')} = {e.v(Status.ACTIVE.value)}",
                f"{e.n('contextBytes')} <= {e.v(budget - added)}",
            )
            return update, cond

        try:
            return self._versioned(session_id, owner, expected_version, change, judge)
        except ItemTooLarge as err:
            if not err.by_engine:
                raise
            # The engine's own limit came first (moto refuses UpdateItem near 200 KB).
            seen = self._seen_entry(session_id, owner)
            current = METADATA_OVERHEAD + (seen.context_bytes if seen else 0)
            raise ItemTooLarge(current, added, self.item_size_limit, by_engine=True) from err

    # ------------------------------------------------------------------ tool calls

    def record_tool_call(
        self,
        session_id: str,
        tool_call_id: str,
        tool_name: str,
        input: JSON,
        output: JSON,
        duration_ms: int,
        *,
        owner: str | None = None,
        ttl_seconds: int | None = None,
    ) -> ToolCallRecord:
        """Record one tool call, exactly once, on an active session.

        One ``TransactWriteItems`` with three actions:

        1. ConditionCheck on the metadata item: exists, not expired, owner, status ``active``;
        2. Put of a small guard item ``toolid#<id>`` if absent -- the idempotency key, stable
           across retries, instances and time;
        3. Put of the record at ``tool#<recordedAt>#<id>`` -- time order for the history Query.

        Cost: one request, 2 WCU per started KB of each of the three items (transactional
        writes cost double), typically 6 WCU. A deterministic ``tool#<id>`` key alone would cost
        1 WCU but lose time order; a timestamp key alone (the source design) duplicates on every
        retry. A retry of a recorded call costs the failed transaction plus one GetItem of the
        original record, and writes nothing.

        The record expires with its session (same ``ttl``) unless ``ttl_seconds`` says
        otherwise; an instance that has not seen the session yet reads it once to learn it.
        """
        validate_id(session_id, "session_id")
        validate_id(tool_call_id, "tool_call_id")
        _validate_owner(owner)
        if not isinstance(tool_name, str) or not tool_name or len(tool_name) > 256:
            raise InvalidInput("tool_name must be a non-empty string of at most 256 characters")
        name_text = codec.encode(tool_name, "tool_name")
        if isinstance(duration_ms, bool) or not isinstance(duration_ms, int) or duration_ms < 0:
            raise InvalidInput("duration_ms must be a non-negative int")
        if ttl_seconds is not None:
            _validate_ttl(ttl_seconds)
        input_text = codec.encode(input, "input")
        output_text = codec.encode(output, "output")
        now_ms = self.clock.now_ms()
        if ttl_seconds is not None:
            ttl = now_ms // 1000 + ttl_seconds
        else:
            seen = self._seen_entry(session_id, owner)
            ttl = seen.ttl if seen else self.get_session(session_id, owner=owner).ttl
        recorded_at = format_timestamp(now_ms)
        record_sk = schema.tool_sk(recorded_at, tool_call_id)
        record = item_to_wire(
            {
                "pk": schema.pk(session_id),
                "sk": record_sk,
                "sessionId": session_id,
                "toolCallId": tool_call_id,
                "toolName": tool_name,
                "input": input_text,
                "output": output_text,
                "durationMs": duration_ms,
                "recordedAt": recorded_at,
                "ttl": ttl,
            }
        )
        size = sizing.item_size(record)
        if size > self.item_size_limit:
            raise ItemTooLarge(0, size, self.item_size_limit)
        digest = codec.fingerprint(name_text, input, output)
        guard = item_to_wire(
            {
                "pk": schema.pk(session_id),
                "sk": schema.guard_sk(tool_call_id),
                "toolCallId": tool_call_id,
                "recordSk": record_sk,
                "fingerprint": digest,
                "ttl": ttl,
            }
        )
        settle = Settle()
        for attempt in range(self.retry.max_attempts):
            now_s = self.clock.now_ms() // 1000
            e = Expr()
            check = all_of(
                live_session(e, owner=owner, now_s=now_s),
                f"{e.n('status')} = {e.v(Status.ACTIVE.value)}",
            )
            absent = Expr()
            not_there = f"attribute_not_exists({absent.n('pk')})"
            request = {
                "TransactItems": [
                    {
                        "ConditionCheck": {
                            "TableName": self.table_name,
                            "Key": schema.meta_key(session_id),
                            "ConditionExpression": check,
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                            **e.params(),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table_name,
                            "Item": guard,
                            "ConditionExpression": not_there,
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                            **absent.params(),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self.table_name,
                            "Item": record,
                            "ConditionExpression": not_there,
                            **absent.params(),
                        }
                    },
                ]
            }
            try:
                self._call("transact_write_items", request)
                return ToolCallRecord.from_item(to_python(record) or {})
            except Cancelled as cancelled:
                meta_old, guard_old = cancelled.old(0), cancelled.old(1)
                if cancelled.failed(0):
                    if meta_old is None or not _owned(meta_old, owner):
                        # Absent, or somebody else's: indistinguishable on purpose.
                        raise SessionNotFound(session_id) from None
                    if int(meta_old["ttl"]) <= now_s:
                        raise SessionExpired(session_id, int(meta_old["ttl"])) from None
                if cancelled.failed(1) and guard_old is not None:
                    # Already recorded (by us earlier, or by another instance): the same call
                    # returns the original record even if the session has closed since.
                    stored = self._stored_record(session_id, guard_old)
                    if guard_old["fingerprint"] != digest:
                        raise ToolCallConflict(stored) from None
                    return stored
                if cancelled.failed(0) and meta_old is not None:
                    raise SessionNotActive(session_id, Status(meta_old["status"])) from None
                if not cancelled.conflict or attempt + 1 == self.retry.max_attempts:
                    raise DynamoDBError(
                        "TransactionCanceledException", str(cancelled.reasons)
                    ) from None
                self.retry.backoff(attempt)  # a concurrent transaction touched these items
            except Unavailable as exc:
                settle.absorb(exc)
                self.retry.backoff(attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _stored_record(self, session_id: str, guard: dict[str, Any]) -> ToolCallRecord:
        response = self._call(
            "get_item",
            {
                "TableName": self.table_name,
                "Key": {"pk": {"S": schema.pk(session_id)}, "sk": {"S": guard["recordSk"]}},
                "ConsistentRead": True,
            },
        )
        return ToolCallRecord.from_item(to_python(response["Item"]) or {})

    def tool_calls(self, session_id: str, *, owner: str | None = None) -> Iterator[ToolCallRecord]:
        """The session's tool-call history in order of first recording, page by page.

        The first page is read (and the session checked) before this returns, so a missing,
        expired or foreign session raises here, not at the first ``next()``.
        """
        pages = self._history_pages(session_id, owner)
        next(pages)  # the metadata item: checked, not yielded
        first = next(pages)

        def records() -> Iterator[ToolCallRecord]:
            yield from (ToolCallRecord.from_item(item) for item in first)
            for page in pages:
                yield from (ToolCallRecord.from_item(item) for item in page)

        return records()

    def load(
        self, session_id: str, *, owner: str | None = None
    ) -> tuple[Session, list[ToolCallRecord]]:
        """Metadata and full history from one Query (following ``LastEvaluatedKey``)."""
        pages = self._history_pages(session_id, owner)
        session: Session = next(pages)
        records = [ToolCallRecord.from_item(item) for page in pages for item in page]
        return session, records

    def _history_pages(self, session_id: str, owner: str | None) -> Iterator[Any]:
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        e = Expr()
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": (
                f"{e.n('pk')} = {e.v(schema.pk(session_id))} AND "
                f"{e.n('sk')} < {e.v(schema.GUARD_PREFIX)}"
            ),
            "ConsistentRead": True,
            **e.params(),
        }
        now_s = self.clock.now_ms() // 1000
        first = True
        while True:
            response = self._call("query", request)
            items = [to_python(i) or {} for i in response.get("Items", [])]
            if first:
                head = items[0] if items and items[0].get("sk") == schema.META_SK else None
                yield self._live(session_id, head, owner, now_s)
                items = items[1:]
                first = False
            yield items
            if "LastEvaluatedKey" not in response:
                return
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # ------------------------------------------------------------------ machinery

    def _versioned(
        self,
        session_id: str,
        owner: str | None,
        expected: int | None,
        change: Callable[[Expr], tuple[str, str]],
        judge: Callable[[Session], Session | None],
    ) -> Session:
        """One versioned write: ``version = :v`` condition, increment and token in one request.

        ``change`` gives the SET clause and the extra condition; ``judge`` looks at the current
        item after a failure and returns it (no-op success), raises, or returns None (a stale
        version: retry). Our token goes into ring slot ``w<new version % RING_SIZE>``; if a
        retry fails and finds it there, our earlier attempt landed and we are done.
        Callers validate ``session_id`` and ``owner`` first.
        """
        token = self.ids.token()
        if expected is not None:
            version = expected
        else:
            hint = self._seen_entry(session_id, owner)
            if hint is not None:
                version = hint.version
            else:
                current = self.get_session(session_id, owner=owner)
                done = judge(current)
                if done is not None:
                    return done
                version = current.version
        uncertain_since: int | None = None  # version of the attempt whose response was lost
        settle = Settle()
        for attempt in range(self.retry.max_attempts):
            now_ms = self.clock.now_ms()
            e = Expr()
            update, extra = change(e)
            new_version = version + 1
            attempted = version
            request = {
                "TableName": self.table_name,
                "Key": schema.meta_key(session_id),
                "UpdateExpression": (
                    f"SET {update}, {e.n('version')} = {e.v(new_version)}, "
                    f"{e.n('updatedAt')} = {e.v(format_timestamp(now_ms))}, "
                    f"{e.n(schema.ring_slot(new_version))} = {e.v(token)}"
                ),
                "ConditionExpression": all_of(
                    live_session(e, owner=owner, now_s=now_ms // 1000),
                    f"{e.n('version')} = {e.v(version)}",
                    extra,
                ),
                "ReturnValues": "ALL_NEW",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                **e.params(),
            }
            try:
                return self._session_from(self._call("update_item", request)["Attributes"])
            except ConditionFailed as failed:
                old = failed.old
                if old is not None and token in _ring(old):
                    return self._session_from_python(old)  # our lost attempt had landed
                if failed.ambiguous and uncertain_since is None:
                    uncertain_since = version  # botocore retried a lost attempt of ours
                current = self._live(session_id, old, owner, now_ms // 1000)
                self._remember(current)
                if (
                    uncertain_since is not None
                    and current.version >= uncertain_since + 1 + schema.RING_SIZE
                ):
                    # The ring no longer covers the lost attempt: applying again could duplicate.
                    raise Unavailable(
                        f"session {session_id!r}: a write's response was lost and its outcome "
                        "can no longer be proven",
                        maybe_applied=True,
                    ) from None
                done = judge(current)
                if done is not None:
                    return done
                if current.version == version:  # only the extra condition failed, unexplained
                    raise DynamoDBError("ConditionalCheckFailedException", repr(old)) from None
                if expected is not None:
                    raise VersionConflict(session_id, expected, current) from None
                version = current.version
            except Unavailable as exc:
                if exc.maybe_applied and uncertain_since is None:
                    uncertain_since = version
                settle.absorb(exc)
            if attempt + 1 < self.retry.max_attempts:
                self.retry.backoff(attempt)
        current = self.get_session(session_id, owner=owner)
        raise ConflictRetriesExhausted(session_id, attempted, current, self.retry.max_attempts)

    def _call(self, operation: str, request: dict[str, Any]) -> Any:
        return send(self.client, operation, request, self.table_name, self.item_size_limit)

    def _live(
        self, session_id: str, item: dict[str, Any] | None, owner: str | None, now_s: int
    ) -> Session:
        """The item as a Session, or the error that explains why there is none."""
        if item is None or not _owned(item, owner):
            raise SessionNotFound(session_id)
        if int(item["ttl"]) <= now_s:
            raise SessionExpired(session_id, int(item["ttl"]))
        return Session.from_item(item)

    def _session_from(self, wire_item: dict[str, Any]) -> Session:
        return self._session_from_python(to_python(wire_item) or {})

    def _session_from_python(self, item: dict[str, Any]) -> Session:
        session = Session.from_item(item)
        self._remember(session)
        return session

    def _remember(self, session: Session) -> None:
        with self._seen_lock:
            old = self._seen.get(session.session_id)
            if old is None or old.version <= session.version:
                self._seen[session.session_id] = _Seen(
                    session.version, session.context_bytes, session.ttl, session.owner
                )
            self._seen.move_to_end(session.session_id)
            while len(self._seen) > 10_000:
                self._seen.popitem(last=False)

    def _seen_entry(self, session_id: str, owner: str | None) -> _Seen | None:
        """The hint for ``session_id`` -- only for its own owner: acting on another owner's
        hint (refusing before sending, say) would tell them the session exists."""
        with self._seen_lock:
            seen = self._seen.get(session_id)
        return seen if seen is not None and seen.owner == owner else None


def _ring(item: dict[str, Any]) -> set[str]:
    return {item[slot] for i in range(schema.RING_SIZE) if (slot := f"w{i}") in item}


def _owned(item: dict[str, Any], owner: str | None) -> bool:
    return item.get("owner") == owner


def _validate_ttl(ttl_seconds: object) -> None:
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int):
        raise InvalidInput("ttl_seconds must be an int (seconds)")
    if not 0 < ttl_seconds <= _MAX_TTL_SECONDS:
        raise InvalidInput(f"ttl_seconds must be in 1..{_MAX_TTL_SECONDS}, got {ttl_seconds}")


def _validate_owner(owner: object) -> None:
    if owner is not None:
        validate_id(owner, "owner")
