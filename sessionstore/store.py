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
``table``           the table and the driver of every write     06
==================  ==========================================  ========

Each method's docstring gives its cost in requests and its own errors; its module's, the why.
Any call on a session may also raise ``InvalidInput`` (nothing sent), ``SessionNotFound``
(missing, or another owner's), ``SessionExpired``, ``Unavailable`` and ``DynamoDBError``. A
failed condition returns the current item (ALL_OLD), which tells these apart from a wrong status
or a stale version -- and whether our own earlier attempt had in fact landed.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import Any, Generic, Never, NoReturn, TypeVar, cast, overload

from . import attributes, context, lifecycle, reads, schema, telemetry, tool_calls, validate
from .attributes import attribute_texts
from .clock import Clock, SystemClock
from .codec import JSON
from .context import ContextReader, Limits
from .ids import IdFactory, RandomIds, validate_session
from .item import METADATA_OVERHEAD, WIDEST_CONTEXT_BYTES, WIDEST_COUNT, WIDEST_TTL
from .models import Context, Loaded, Session, Status, ToolCallRecord
from .retry import RetryPolicy
from .sizing import MAX_ITEM_BYTES
from .table import Table

__all__ = ["MAX_CONTEXT_BYTES", "MAX_CONTEXT_MESSAGES", "SessionStore"]

#: Defaults of the context limits (``SessionStore(max_context_messages=, max_context_bytes=)``).
MAX_CONTEXT_MESSAGES = 100_000
MAX_CONTEXT_BYTES = 64 * 2**20

T = TypeVar("T")


class Forward(Generic[T]):
    """A read-only attribute read through another one, ``Forward[Clock]("table.clock")``: one
    line where a property takes four, here and in ``aio``. Assigning it raises (and mypy refuses
    it), as for a property without a setter."""

    def __init__(self, path: str) -> None:
        self.path, self._get = path, operator.attrgetter(path)
        self.__doc__ = f"``{path}``, read-only."

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Forward[T]: ...
    @overload
    def __get__(self, obj: object, owner: type[Any]) -> T: ...
    def __get__(self, obj: object, owner: type[Any]) -> Forward[T] | T:
        return self if obj is None else cast(T, self._get(obj))

    def __set__(self, obj: object, value: Never) -> NoReturn:
        raise AttributeError(f"read-only: it is {self.path}")


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
        item_size_limit: int = MAX_ITEM_BYTES,
        max_context_messages: int = MAX_CONTEXT_MESSAGES,
        max_context_bytes: int = MAX_CONTEXT_BYTES,
    ) -> None:
        validate.int_in("item_size_limit", item_size_limit, METADATA_OVERHEAD + 1, MAX_ITEM_BYTES)
        self.limits = Limits(
            validate.int_in("max_context_messages", max_context_messages, 1, WIDEST_COUNT),
            validate.int_in("max_context_bytes", max_context_bytes, 1, WIDEST_CONTEXT_BYTES),
        )
        clock, ids, retry = clock or SystemClock(), ids or RandomIds(), retry or RetryPolicy()
        self.table = Table(client, table_name, clock, ids, retry, item_size_limit)

    # What the store was built with, read-only (the table is frozen).
    client = Forward[Any]("table.client")
    table_name = Forward[str]("table.name")
    clock = Forward[Clock]("table.clock")
    ids = Forward[IdFactory]("table.ids")
    item_size_limit = Forward[int]("table.item_size_limit")

    def create_table(self, *, wait: bool = True) -> bool:
        """Create the table if missing, with TTL on: idempotent, safe for every instance to call
        at start (requests and races: ``schema.create_table``). True if this call created it."""
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
        validate_session(session_id, owner)
        validate.ttl(ttl_seconds, idle_seconds)
        attrs, _ = attribute_texts({} if attributes is None else attributes, "attributes")
        return lifecycle.create(self.table, session_id, owner, ttl_seconds, idle_seconds, attrs)

    @telemetry.traced("get_session")
    def get_session(self, session_id: str, *, owner: str | None = None) -> Session:
        """Strongly consistent read of the metadata item, and of the attributes item unless the
        session never had attributes or this instance holds their current copy."""
        validate_session(session_id, owner)
        return reads.get(self.table, session_id, owner)

    @telemetry.traced("touch")
    def touch(self, session_id: str, *, owner: str | None = None) -> Session:
        """Keep a session alive for a reader that writes nothing (writes move the deadline
        themselves): one UpdateItem of its idle deadline, no version bump, no token."""
        validate_session(session_id, owner)
        return lifecycle.touch(self.table, session_id, owner)

    @telemetry.traced("transition")
    def transition(self, session_id: str, to: Status, *, owner: str | None = None) -> Session:
        """Move the session to ``to``: one UpdateItem conditioned on the statuses it may come
        from (``lifecycle``), no read. Asking for the current status is a no-op; another move
        not in ``TRANSITIONS`` raises ``InvalidTransition``."""
        validate_session(session_id, owner)
        return lifecycle.transition(self.table, session_id, to, owner)

    @telemetry.traced("activate")
    def activate(self, session_id: str, *, owner: str | None = None) -> Session:
        """``transition(session_id, Status.ACTIVE)``: one UpdateItem."""
        return self.transition(session_id, Status.ACTIVE, owner=owner)

    @telemetry.traced("begin_close")
    def begin_close(self, session_id: str, *, owner: str | None = None) -> Session:
        """``transition(session_id, Status.CLOSING)``: one UpdateItem."""
        return self.transition(session_id, Status.CLOSING, owner=owner)

    @telemetry.traced("close")
    def close(self, session_id: str, *, owner: str | None = None) -> Session:
        """``transition(session_id, Status.CLOSED)``: one UpdateItem."""
        return self.transition(session_id, Status.CLOSED, owner=owner)

    @telemetry.traced("close_and_expire")
    def close_and_expire(
        self, session_id: str, *, owner: str | None = None, expire_at: int
    ) -> None:
        """``closing`` -> ``closed``, and the ``ttl`` of its metadata and attributes items set to
        ``expire_at`` (epoch seconds): one ``TransactWriteItems``, nothing read back. After it,
        the session reads as expired (pages and calls keep their own ttl). Already closed: left
        as it is; another status: ``InvalidTransition``."""
        validate_session(session_id, owner)
        validate.int_in("expire_at", expire_at, 0, WIDEST_TTL)
        lifecycle.close_and_expire(self.table, session_id, owner, expire_at)

    @telemetry.traced("update_status")
    def update_status(
        self, session_id: str, status: Status, *, owner: str | None = None
    ) -> Session:
        """``lifecycle.update_status``: one UpdateItem (a cold instance reads first), one more per
        conflict up to ``retry.max_attempts`` (then ``ConflictRetriesExhausted``); an illegal
        move raises ``InvalidTransition``."""
        validate_session(session_id, owner)
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
        """Set ``changes`` and delete ``remove`` among the session's attributes (the ``attributes``
        module): one ``TransactWriteItems``, the version up by one, nothing read back (a cold
        instance reads first). Last writer wins per name; with ``expected_version``, another
        current version raises ``VersionConflict``. ``SessionNotActive`` if closed,
        ``ItemTooLarge`` past ``ATTRIBUTES_MAX_BYTES``, ``RequestOverLimit`` (unsent) past
        DynamoDB's 4 KB expression limit (about 278 short names)."""
        validate_session(session_id, owner)
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
        """Append ``messages`` to an active session's context in order, exactly once (``context``):
        one UpdateItem reserves the seqs, one PutItem stores the page; returns the session as it
        left it. Concurrent appends never refuse each other; with ``expected_version``, another
        current version raises ``VersionConflict``. ``ContextFull``, ``ItemTooLarge``: nothing
        written. ``Unavailable`` after the reservation: a hole readers skip (``maybe_applied``
        says whether the page may have landed)."""
        validate_session(session_id, owner)
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
        """Record one tool call, exactly once, on an active session (``tool_calls``): one
        ``TransactWriteItems``, typically 4 WCU; a repeat, one request and nothing written;
        another request under the id, ``ToolCallConflict``. It expires with its session unless
        ``ttl_seconds`` says otherwise."""
        validate_session(session_id, owner)
        call = tool_calls.Call.of(session_id, tool_call_id, tool_name, input, owner)
        return tool_calls.record(self.table, call, output, duration_ms, ttl_seconds)

    @telemetry.traced("tool_calls")
    def tool_calls(self, session_id: str, *, owner: str | None = None) -> Iterator[ToolCallRecord]:
        """The session's live tool-call history in order of recording, read whole before this
        returns: a GetItem of the metadata item, then a Query of the ``tool#`` range. Calls
        claimed but never recorded are left out."""
        validate_session(session_id, owner)
        return iter(tool_calls.read_history(self.table, session_id, owner))

    @telemetry.traced("context")
    def context(
        self, session_id: str, *, owner: str | None = None, after: int | None = None
    ) -> ContextReader:
        """The session's messages in order (after seq ``after``), read lazily page by page: one
        Query (from ``after``, a GetItem before it) that checks the session before returning.
        The reader's ``position`` is the ``after`` to read on from next time."""
        validate_session(session_id, owner)
        each_page = partial(telemetry.operation, "read_page", session_id, client=self.client)
        return context.read(self.table, session_id, owner, after, each_page)

    @telemetry.traced("load")
    def load(self, session_id: str, *, owner: str | None = None) -> Loaded:
        """Metadata, context and live tool-call history from one Query (``metadata`` to the last
        ``tool#`` key, following ``LastEvaluatedKey``): ``Loaded(session, context, tool_calls)``."""
        validate_session(session_id, owner)
        session, first, items = reads.head(self.table, session_id, owner, schema.TOOLS_END)
        rows = list(items)
        pages = [row for row in rows if row["sk"].startswith(schema.PAGE_PREFIX)]
        calls = rows[len(pages) :]  # every call (tool#) sorts after every page (msg#)
        now_s = self.table.now_ms() // 1000
        recent = context.recent_reservations(first, now_s)
        texts = [text for _, text in context.read_context(session, pages, None, now_s, recent)]
        return Loaded(session, Context(tuple(texts)), tool_calls.history(calls, now_s))
