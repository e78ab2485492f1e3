"""SessionStore: the facade. Each method validates the ids and hands the call to the module of
its pattern, with the one object every pattern works over: the ``Table`` (the table's name and
client, the clock, the ids, the retry policy, the driver, and this instance's ``Memory``).

==================  ==========================================  ========
module              pattern                                     notebook
==================  ==========================================  ========
``schema``          one table, one partition per session        01
``item``            the metadata item: fields, guards, size     01
``conditions``      conditions and updates as values            01
``locking``         the version condition; the metadata write   02
``attributes``      session attributes                          02
``context``         context accumulation in pages               03
``tool_calls``      idempotent tool calls: one item per call    04
``lifecycle``       statuses, the guarded move, idle expiry     05
``write_tokens``    did my lost write land?                     06
``table``           the table and the driver of every write       06
==================  ==========================================  ========

Each method's docstring gives its cost in requests. A failed condition returns the current item
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``), which is all it takes to tell "not found" from
"expired" from "wrong status" from "stale version" -- and whether our own earlier attempt had in
fact landed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from . import attributes, context, lifecycle, reads, schema, sizing, telemetry, tool_calls, validate
from .attributes import attribute_texts
from .clock import Clock, SystemClock
from .codec import JSON
from .context import ContextReader, Limits
from .ids import IdFactory, RandomIds
from .item import METADATA_OVERHEAD, WIDEST_CONTEXT_BYTES, WIDEST_COUNT, WIDEST_TTL
from .models import Context, Loaded, Session, Status, ToolCallRecord
from .retry import RetryPolicy
from .table import Table

#: Defaults of the context limits (``SessionStore(max_context_messages=, max_context_bytes=)``).
MAX_CONTEXT_MESSAGES = 100_000
MAX_CONTEXT_BYTES = 64 * 2**20


class SessionStore:
    """Sessions, their context and their tool-call history in one DynamoDB table.

    ``client`` is a boto3 DynamoDB client (see ``sessionstore.connect``); ``clock`` and ``ids``
    are injected so notebooks and tests are deterministic; ``retry`` bounds the backoff on
    version conflicts (botocore's own retry mode handles throttling and network faults).
    ``max_context_messages`` and ``max_context_bytes`` bound each session's context
    (``ContextFull``); ``item_size_limit`` bounds each item (a page, a record).
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
        max_context_messages: int = MAX_CONTEXT_MESSAGES,
        max_context_bytes: int = MAX_CONTEXT_BYTES,
    ) -> None:
        validate.int_in(
            "item_size_limit", item_size_limit, METADATA_OVERHEAD + 1, sizing.MAX_ITEM_BYTES
        )
        self.limits = Limits(
            validate.int_in("max_context_messages", max_context_messages, 1, WIDEST_COUNT),
            validate.int_in("max_context_bytes", max_context_bytes, 1, WIDEST_CONTEXT_BYTES),
        )
        self.table = Table(
            client,
            table_name,
            clock or SystemClock(),
            ids or RandomIds(),
            retry or RetryPolicy(),
            item_size_limit,
        )

    # What the store was built with, read-only (the table is frozen).
    @property
    def client(self) -> Any:
        return self.table.client

    @property
    def table_name(self) -> str:
        return self.table.name

    @property
    def clock(self) -> Clock:
        return self.table.clock

    @property
    def ids(self) -> IdFactory:
        return self.table.ids

    @property
    def item_size_limit(self) -> int:
        return self.table.item_size_limit

    def create_table(self, *, wait: bool = True) -> bool:
        """Create the table if missing (idempotent); True if this call created it."""
        return schema.create_table(self.client, self.table_name, wait=wait)

    @telemetry.traced("create_session")
    def create_session(
        self,
        session_id: str | None = None,
        *,
        owner: str | None = None,
        ttl_seconds: int = 86400,
        idle_seconds: int | None = None,
        attributes: Mapping[str, JSON] | None = None,
    ) -> Session:
        """Create a session in ``initializing``: one PutItem (with ``attributes``, a transaction of
        it and the attributes item), ``SessionAlreadyExists`` if the id is taken. ``ttl_seconds``
        is its absolute cap; with ``idle_seconds`` (1..``ttl_seconds``) it also expires once no
        accepted write has touched it for that long (README, "Idle expiry")."""
        session_id = self.ids.session_id() if session_id is None else session_id
        validate.session(session_id, owner)
        validate.ttl(ttl_seconds, idle_seconds)
        attrs, _ = attribute_texts({} if attributes is None else attributes, "attributes")
        return lifecycle.create(self.table, session_id, owner, ttl_seconds, idle_seconds, attrs)

    @telemetry.traced("get_session")
    def get_session(self, session_id: str, *, owner: str | None = None) -> Session:
        """Strongly consistent read of the metadata item, and of the attributes item unless the
        session never had attributes or this instance holds their current copy."""
        validate.session(session_id, owner)
        return reads.get(self.table, session_id, owner)

    @telemetry.traced("touch")
    def touch(self, session_id: str, *, owner: str | None = None) -> Session:
        """Keep a session alive for a reader that writes nothing (writes move the deadline
        themselves): one UpdateItem ``SET idleUntil = idle + :now`` under the live condition, no
        version bump, no token. A missing, expired or foreign session raises as a read would."""
        validate.session(session_id, owner)
        return lifecycle.touch(self.table, session_id, owner)

    @telemetry.traced("transition")
    def transition(self, session_id: str, to: Status, *, owner: str | None = None) -> Session:
        """Move the session to ``to`` if the lifecycle table allows it (else ``InvalidTransition``)
        in one request: the allowed source statuses are the condition, so no read is needed
        before; on a failure the returned old item says why. Asking for the current status is a
        no-op."""
        validate.session(session_id, owner)
        return lifecycle.transition(self.table, session_id, to, owner)

    @telemetry.traced("activate")
    def activate(self, session_id: str, *, owner: str | None = None) -> Session:
        return self.transition(session_id, Status.ACTIVE, owner=owner)

    @telemetry.traced("begin_close")
    def begin_close(self, session_id: str, *, owner: str | None = None) -> Session:
        return self.transition(session_id, Status.CLOSING, owner=owner)

    @telemetry.traced("close")
    def close(self, session_id: str, *, owner: str | None = None) -> Session:
        return self.transition(session_id, Status.CLOSED, owner=owner)

    @telemetry.traced("close_and_expire")
    def close_and_expire(
        self, session_id: str, *, owner: str | None = None, expire_at: int
    ) -> None:
        """``closing`` -> ``closed``, and the session let go: one ``TransactWriteItems`` that
        closes it and sets the ``ttl`` of its metadata and attributes items to ``expire_at``
        (epoch seconds); a closed session's attributes can no longer change, so nothing moves
        it back. After ``expire_at`` the session reads as expired and DynamoDB's TTL deletes
        both items (page and tool-call items keep their own ttl). A session already closed is
        left as it is; another status is ``InvalidTransition``. Nothing is read back."""
        validate.session(session_id, owner)
        validate.int_in("expire_at", expire_at, 0, WIDEST_TTL)
        lifecycle.close_and_expire(self.table, session_id, owner, expire_at)

    @telemetry.traced("update_status")
    def update_status(
        self, session_id: str, status: Status, *, owner: str | None = None
    ) -> Session:
        """The source design's optimistic read-modify-write, done right: one request pinned to
        the version of this instance's last copy of the session (a cold instance reads it
        first); a conflict is retried with the version from ALL_OLD, one request per retry, up
        to ``retry.max_attempts``. An illegal move raises ``InvalidTransition``."""
        validate.session(session_id, owner)
        return lifecycle.update_status(self.table, session_id, status, owner)

    @telemetry.traced("update_attributes")
    def update_attributes(
        self,
        session_id: str,
        changes: Mapping[str, JSON],
        *,
        remove: Sequence[str] = (),
        expected_version: int | None = None,
        owner: str | None = None,
    ) -> None:
        """Set ``changes`` and delete the names in ``remove`` among the session's attributes:
        one ``TransactWriteItems`` of the metadata and attributes items (the version goes up by
        one), and nothing read back -- read the session if you need it (an instance that has not
        seen the session reads it first).

        Names match ``[A-Za-z][A-Za-z0-9_.-]{0,63}``; all the attributes together take at most
        ``ATTRIBUTES_MAX_BYTES`` (``ItemTooLarge``); any status but ``closed``
        (``SessionNotActive``). Without ``expected_version`` last writer wins per name; with it,
        another current version raises ``VersionConflict(current=...)``. More names than
        DynamoDB's 4 KB expression limit allows (about 278 short ones) raise
        ``RequestOverLimit``, unsent."""
        validate.session(session_id, owner)
        attributes.update(self.table, session_id, changes, remove, expected_version, owner)

    @telemetry.traced("append_context")
    def append_context(
        self,
        session_id: str,
        messages: Sequence[JSON],
        *,
        expected_version: int | None = None,
        owner: str | None = None,
    ) -> Session:
        """Append ``messages`` to the context of an active session, in order and exactly once:
        an UpdateItem reserves the next seqs on the metadata item, then a PutItem stores them as
        one immutable page. Returns the metadata item as this append left it (``message_count``
        where it ended). Without ``expected_version`` concurrent appends never refuse each other;
        with it, another current version raises ``VersionConflict(current=...)``.
        ``ContextFull`` and ``ItemTooLarge`` are raised with nothing written.

        If the page cannot be written after the reservation (``Unavailable``), the reserved
        seqs stay a hole that readers skip: with ``maybe_applied=False`` the messages were not
        stored; with ``maybe_applied=True`` a page attempt may have landed."""
        validate.session(session_id, owner)
        return context.append(
            self.table, self.limits, session_id, messages, expected_version, owner
        )

    @telemetry.traced("record_tool_call")
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
        """Record one tool call, exactly once, on an active session: one ``TransactWriteItems``
        (an Update of the live, active session that only moves its idle deadline on, and the
        call item at ``tool#<id>`` unless a live one holds the id), typically 4 WCU. A repeat is
        answered from the refused request's ALL_OLD: one request, nothing written, no read. A
        different request under the same id raises ``ToolCallConflict``. The record expires
        with its session unless ``ttl_seconds`` says otherwise."""
        validate.session(session_id, owner)
        return tool_calls.record(
            self.table,
            tool_calls.Call.of(session_id, tool_call_id, tool_name, input, owner),
            output,
            duration_ms,
            ttl_seconds,
        )

    @telemetry.traced("tool_calls")
    def tool_calls(self, session_id: str, *, owner: str | None = None) -> Iterator[ToolCallRecord]:
        """The session's live tool-call history in order of recording, read whole before this
        returns: a GetItem of the metadata item (a missing, expired or foreign session raises),
        then a Query of the ``tool#`` range. Calls claimed but never recorded are left out."""
        validate.session(session_id, owner)
        return iter(tool_calls.read_history(self.table, session_id, owner))

    @telemetry.traced("context")
    def context(
        self, session_id: str, *, owner: str | None = None, after: int | None = None
    ) -> ContextReader:
        """Every message of the session's context in order -- or those after seq ``after`` --
        read lazily, page item by page item. From the start: one Query (the metadata item sorts
        first and is checked before anything is returned); from ``after``: a GetItem of the
        metadata item, then a Query from the page holding seq ``after + 1``. The reader's
        ``position`` is the seq to pass as ``after`` next time."""
        validate.session(session_id, owner)

        def each_page() -> AbstractContextManager[Any]:
            return telemetry.operation("read_page", session_id, client=self.client)

        return context.read(self.table, session_id, owner, after, each_page)

    @telemetry.traced("load")
    def load(self, session_id: str, *, owner: str | None = None) -> Loaded:
        """Metadata, context and live tool-call history from one Query (``metadata`` to the last
        ``tool#`` key, following ``LastEvaluatedKey``): ``Loaded(session, context, tool_calls)``."""
        validate.session(session_id, owner)
        session, first, items = reads.head(self.table, session_id, owner, schema.TOOLS_END)
        pages: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for item in items:
            (pages if item["sk"].startswith(schema.PAGE_PREFIX) else calls).append(item)
        now_s = self.table.now_ms() // 1000
        recent = context.recent_reservations(first, now_s)
        texts = [text for _, text in context.read_context(session, pages, None, now_s, recent)]
        return Loaded(session, Context(tuple(texts)), tool_calls.history(calls, now_s))
