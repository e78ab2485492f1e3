"""SessionStore: the facade. Each method validates its arguments, builds the write of its
pattern, drives it, and remembers what it learnt; the patterns live in their own modules:

==================  ==========================================  ========
module              pattern                                     notebook
==================  ==========================================  ========
``schema``          one table, one partition per session         01
``item``            the metadata item: fields, parser, size      01
``locking``         the version condition; the metadata write    02
``context``         context accumulation in pages                03
``tool_calls``      idempotent tool calls: one item per call     04
``lifecycle``       statuses and the guarded transition          05
``write_tokens``    did my lost write land?                      06
``attributes``      session attributes                           02
``attempts``        one driver for every write's attempts        06
==================  ==========================================  ========

Each method's docstring gives its cost in requests. A failed condition returns the current item
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``), which is all it takes to tell "not found" from
"expired" from "wrong status" from "stale version" -- and whether our own earlier attempt had in
fact landed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeGuard, TypeVar

from . import codec, schema, sizing, telemetry
from .attempts import Plan, drive
from .attributes import (
    AttributesEdit,
    AttributesWrite,
    Stored,
    attribute_texts,
    attributes_item,
    stored,
    validate_name,
)
from .clock import Clock, SystemClock, format_timestamp
from .codec import JSON
from .context import (
    AppendEdit,
    ContextReader,
    WritePage,
    first_page_key,
    first_seq,
    landing_s,
    message_texts,
    page_item,
    page_size,
    read_context,
    recent_reservations,
    send_by_ms,
    stated_delay,
    validate_after,
)
from .errors import (
    ContextFull,
    InvalidInput,
    ItemTooLarge,
    SessionNotFound,
    SessionStoreError,
    ToolCallConflict,
    Unavailable,
    VersionConflict,
)
from .expressions import Expr
from .ids import IdFactory, RandomIds, validate_id, validate_token
from .item import (
    METADATA_OVERHEAD,
    WIDEST_CONTEXT_BYTES,
    WIDEST_COUNT,
    live,
    new_item,
    session_from_item,
)
from .lifecycle import CreateSession, Status, StatusEdit
from .locking import Edit, MetadataWrite, Touch
from .models import Context, Loaded, Session, ToolCallRecord
from .retry import RetryPolicy
from .tool_calls import (
    CallState,
    PutToolCall,
    call_item,
    check_record_size,
    history,
    record_from_item,
    recorded_fields,
    state_of,
)
from .wire import install_hooks, item_to_wire, send, send_by, to_python
from .write_tokens import TOKEN_CAP, key, token_seq

R = TypeVar("R")
V = TypeVar("V")

_MAX_HINTS = 10_000  # sessions this instance keeps hints (and settled tokens) for
_MAX_TTL_SECONDS = 366 * 86400 * 10  # ten years: anything longer is a units mistake
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
        if not METADATA_OVERHEAD < item_size_limit <= sizing.MAX_ITEM_BYTES:
            raise InvalidInput(
                f"item_size_limit must be in ({METADATA_OVERHEAD}, {sizing.MAX_ITEM_BYTES}]"
            )
        for name, value, top in (
            ("max_context_messages", max_context_messages, WIDEST_COUNT),
            ("max_context_bytes", max_context_bytes, WIDEST_CONTEXT_BYTES),
        ):
            if not (_is_int(value) and 0 < value <= top):
                raise InvalidInput(f"{name} must be an int in 1..{top}, got {value!r}")
        self.max_context_messages = max_context_messages
        self.max_context_bytes = max_context_bytes
        self.client = client
        install_hooks(client)
        self.table_name = table_name
        self.clock: Clock = clock or SystemClock()
        self.ids: IdFactory = ids or RandomIds()
        self.retry = retry or RetryPolicy()
        self.item_size_limit = item_size_limit
        self._landing_s = landing_s(client)  # how late a page botocore sent may still land
        # A hint, never the truth: the last copy of each session this instance saw (per
        # incarnation), so the first attempt of a read-modify-write can skip the read, and a
        # write can remove the old tokens it showed in ``tk``. A stale hint costs one retry; it
        # never refuses anything by itself.
        self._seen: OrderedDict[str, Session] = OrderedDict()
        # This instance's finished writes per session: their tokens in ``tk`` are dead, and
        # the next write to the session removes them (``write_tokens``).
        self._settled: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        # The last attributes this instance read or wrote per session: a write's ALL_NEW has
        # only the metadata item, whose ``attrsRev`` says whether this copy is still current.
        self._attributes: OrderedDict[str, Stored] = OrderedDict()
        self._seen_lock = threading.Lock()

    # ------------------------------------------------------------------ table

    def create_table(self, *, wait: bool = True) -> bool:
        """Create the table if missing (idempotent); True if this call created it."""
        return schema.create_table(self.client, self.table_name, wait=wait)

    # ------------------------------------------------------------------ sessions

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
        accepted write has touched it for that long (README, "Idle expiry"). ``attributes``: its
        first attributes (see ``update_attributes``)."""
        session_id = self.ids.session_id() if session_id is None else session_id
        _validate_session(session_id, owner)
        _validate_ttl(ttl_seconds, idle_seconds)
        attrs, _ = attribute_texts({} if attributes is None else attributes, "attributes")
        token = self._token()
        now_ms = self.clock.now_ms()
        ttl = now_ms // 1000 + ttl_seconds
        # A fixed-ttl session is idle for its whole ttl: one formula (``expressions.extend_idle``).
        idle = ttl_seconds if idle_seconds is None else idle_seconds
        item = new_item(
            session_id,
            owner,
            format_timestamp(now_ms),
            ttl,
            token,
            now_ms // 1000,
            1 if attrs else 0,
            idle,
            min(now_ms // 1000 + idle, ttl),
        )
        extra = attributes_item(session_id, token, 1, attrs, ttl) if attrs else None
        extra_wire = item_to_wire(extra) if extra is not None else None
        plan = CreateSession(self.table_name, session_id, item_to_wire(item), token, extra_wire)
        try:
            self._drive(plan, f"create session {session_id!r}")
        finally:
            self._settle(session_id, token, ())
        session = session_from_item(item)
        self._remember(session)
        self._keep_attributes(session_id, stored(extra))
        return self._attach(session)

    @telemetry.traced("get_session")
    def get_session(self, session_id: str, *, owner: str | None = None) -> Session:
        """Strongly consistent read of the metadata item, and of the attributes item unless the
        session never had attributes or this instance holds their current copy."""
        _validate_session(session_id, owner)
        return self._attach(self._get(session_id, owner)[0])

    def _get(self, session_id: str, owner: str | None) -> tuple[Session, dict[str, Any]]:
        """The live session, without its attributes, and its item as read (python-typed)."""
        item = self._get_item(schema.meta_key(session_id))
        session = live(session_id, item, owner, self.clock.now_ms() // 1000)
        self._remember(session)
        assert item is not None
        return session, item

    @telemetry.traced("touch")
    def touch(self, session_id: str, *, owner: str | None = None) -> Session:
        """Keep a session alive for a reader that writes nothing (writes move the deadline
        themselves): one UpdateItem ``SET idleUntil = idle + :now`` under the live condition, no
        version bump, no token (and one GetItem of the attributes if this instance's copy is not
        current). A missing, expired or foreign session raises as a read would."""
        _validate_session(session_id, owner)
        what = f"touch of session {session_id!r}"
        session = self._drive(Touch(self.table_name, session_id, owner, self._remember), what)
        return self._landed(what, lambda: self._attach(session))

    # ------------------------------------------------------------------ lifecycle

    @telemetry.traced("transition")
    def transition(self, session_id: str, to: Status, *, owner: str | None = None) -> Session:
        """Move the session to ``to`` if the lifecycle table allows it (else ``InvalidTransition``)
        in one request (and one GetItem of the attributes if this instance's copy is not
        current): the allowed source statuses are the condition, so no read is needed before; on
        a failure the returned old item says why. Asking for the current status is a no-op."""
        _validate_session(session_id, owner)
        if not isinstance(to, Status):
            raise InvalidInput(f"to must be a Status, not {to!r}")
        return self._write(session_id, owner, StatusEdit(session_id, to), version=None)

    @telemetry.traced("activate")
    def activate(self, session_id: str, *, owner: str | None = None) -> Session:
        return self.transition(session_id, Status.ACTIVE, owner=owner)

    @telemetry.traced("begin_close")
    def begin_close(self, session_id: str, *, owner: str | None = None) -> Session:
        return self.transition(session_id, Status.CLOSING, owner=owner)

    @telemetry.traced("close")
    def close(self, session_id: str, *, owner: str | None = None) -> Session:
        return self.transition(session_id, Status.CLOSED, owner=owner)

    @telemetry.traced("update_status")
    def update_status(
        self, session_id: str, status: Status, *, owner: str | None = None
    ) -> Session:
        """The source design's optimistic read-modify-write, done right (``locking``): one
        request pinned to the version of this instance's last copy of the session (a cold
        instance reads it first); a conflict is retried with the version from ALL_OLD, one
        request per retry, up to ``retry.max_attempts``. An illegal move raises
        ``InvalidTransition``, checked on the item as read and again by the condition."""
        _validate_session(session_id, owner)
        if not isinstance(status, Status):
            raise InvalidInput(f"status must be a Status, not {status!r}")
        edit = StatusEdit(session_id, status)
        seen = self._hint(session_id, owner)
        if seen is None:
            seen = self._get(session_id, owner)[0]
            done = edit.judge(seen)
            if done is not None:
                return self._attach(done)
        return self._write(session_id, owner, edit, version=seen.version)

    # ------------------------------------------------------------------ attributes

    @telemetry.traced("update_attributes")
    def update_attributes(
        self,
        session_id: str,
        changes: Mapping[str, JSON],
        *,
        remove: Sequence[str] = (),
        expected_version: int | None = None,
        owner: str | None = None,
    ) -> Session:
        """Set ``changes`` and delete the names in ``remove`` among the session's attributes
        (module ``attributes``): one ``TransactWriteItems`` of the metadata and attributes items
        (the version goes up by one), then one Query that reads the session back; an instance
        that has not seen the session reads it first.

        Names match ``[A-Za-z][A-Za-z0-9_.-]{0,63}``; all the attributes together take at most
        ``ATTRIBUTES_MAX_BYTES`` (``ItemTooLarge``); any status but ``closed``
        (``SessionNotActive``). Without ``expected_version`` last writer wins per name; with it,
        another current version raises ``VersionConflict(current=...)``. More names than
        DynamoDB's 4 KB expression limit allows (about 278 short ones) raise
        ``RequestOverLimit``, unsent.
        """
        _validate_session(session_id, owner)
        _validate_expected(expected_version)
        texts, added = attribute_texts(changes, "changes")
        if isinstance(remove, str | bytes) or not isinstance(remove, Sequence):
            raise InvalidInput("remove must be a sequence of attribute names")
        for name in remove:
            validate_name(name)
        gone = tuple(dict.fromkeys(remove))
        if not texts and not gone:
            raise InvalidInput("changes or remove must name at least one attribute")
        both = set(texts).intersection(gone)
        if both:
            raise InvalidInput(f"attributes both changed and removed: {sorted(both)}")
        seen = self._hint(session_id, owner) or self._get(session_id, owner)[0]
        edit = AttributesEdit(session_id, texts, gone, added, seen.incarnation)
        return self._write(
            session_id,
            owner,
            edit,
            version=expected_version,
            expected=True,
            wrap=lambda meta: AttributesWrite(meta, edit, seen.ttl),
        )

    # ------------------------------------------------------------------ context

    @telemetry.traced("append_context")
    def append_context(
        self,
        session_id: str,
        messages: Sequence[JSON],
        *,
        expected_version: int | None = None,
        owner: str | None = None,
    ) -> Session:
        """Append ``messages`` to the context of an active session, in order and exactly once.

        Two writes (module ``context``): an UpdateItem reserves the next seqs on the metadata
        item under every guard and bumps the version; then a PutItem stores the messages as one
        immutable page. Returns the metadata item as this append left it (after a lost
        response settled from a later copy of the item: ``message_count`` where this append
        ended, the version it set when ``expected_version`` pinned it, else the later copy's).
        Without ``expected_version`` concurrent appends never refuse each other; with it, another
        current version raises ``VersionConflict(current=...)``. ``ContextFull`` (past the store's
        limits) and ``ItemTooLarge`` (more than one page holds) are raised with nothing written.

        If the page cannot be written after the reservation (``Unavailable``), the reserved
        seqs stay a hole that readers skip (``message_count`` counts them): with
        ``maybe_applied=False`` the messages were not stored; with ``maybe_applied=True`` a page
        attempt may have landed (in time for every reader), so they may be there.
        """
        _validate_session(session_id, owner)
        encoded = message_texts(messages)
        _validate_expected(expected_version)
        added = sum(map(sizing.text_size, encoded))
        count = len(encoded)
        if count > self.max_context_messages or added > self.max_context_bytes:
            raise ContextFull(
                session_id, 0, 0, count, added, self.max_context_messages, self.max_context_bytes
            )
        token = self._token()
        size = page_size(session_id, token, encoded)
        if size > self.item_size_limit:
            raise ItemTooLarge(0, size, self.item_size_limit, what="context page")
        edit = AppendEdit(
            session_id,
            count,
            added,
            self.max_context_messages,
            self.max_context_bytes,
            stated_delay(self._landing_s),
        )
        reserved = False

        def write_page(session: Session) -> None:
            nonlocal reserved
            reserved = True
            entry = session.write_tokens[key(token)]
            item = page_item(
                session_id, token_seq(entry), encoded, session.ttl, token, session.incarnation
            )
            # Sent, botocore's own retries included, only while readers will still wait for it.
            deadline_ms = send_by_ms(entry, self._landing_s)
            with send_by(lambda: self.clock.now_ms() > deadline_ms):
                self._drive(
                    WritePage(self.table_name, session_id, item, token, deadline_ms),
                    f"context page of session {session_id!r}",
                )

        try:
            session = self._write(
                session_id,
                owner,
                edit,
                version=expected_version,
                expected=True,
                then=write_page,
                token=token,
            )
        except Unavailable as exc:
            if reserved or not exc.maybe_applied:
                raise
            # Only the reservation may have landed; the page was never sent.
            raise Unavailable(
                f"append to session {session_id!r}: {exc}; the messages were not stored "
                "(a reservation may have landed, leaving a hole that readers skip)",
                maybe_applied=False,
            ) from exc
        end = first_seq(session, token) + count
        if session.message_count == end:
            return session
        # A lost response settled from a later copy of the item (other appends on top): the
        # caller reads on from where *this* append ended, or it would skip their messages.
        version = session.version if expected_version is None else expected_version + 1
        return dataclasses.replace(session, message_count=end, version=version)

    # ------------------------------------------------------------------ tool calls

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
        """Record one tool call, exactly once, on an active session (module ``tool_calls``).

        One ``TransactWriteItems`` (``PutToolCall``): an Update of the live, active session
        that only moves its idle deadline on, and the recorded call item at ``tool#<id>`` unless
        a live one holds the id. Cost: one request, 2 WCU per started KB of each of the two
        items (transactional writes bill double), typically 4 WCU. A repeat is answered from
        the refused request's ALL_OLD: one request, nothing written, no read.

        The item keeps a digest of the *request* (tool name + input): a repeat with the same
        request returns the stored record whatever output it brings; a different request under
        the same id -- or an id claimed by a call that has not finished -- raises
        ``ToolCallConflict``.

        The record expires with its session (same ``ttl``) unless ``ttl_seconds`` says
        otherwise; an instance that has not seen the session yet reads it once to learn it.
        """
        validate_id(session_id, "session_id")
        validate_id(tool_call_id, "tool_call_id")
        if owner is not None:
            validate_id(owner, "owner")
        if not isinstance(tool_name, str) or not tool_name or len(tool_name) > 256:
            raise InvalidInput("tool_name must be a non-empty string of at most 256 characters")
        name_text = codec.encode(tool_name, "tool_name")
        if not (_is_int(duration_ms) and duration_ms >= 0):
            raise InvalidInput("duration_ms must be a non-negative int")
        if ttl_seconds is not None:
            _validate_ttl(ttl_seconds)
        input_text = codec.encode(input, "input")
        output_text = codec.encode(output, "output")
        now_ms = self.clock.now_ms()
        if ttl_seconds is not None:
            ttl = now_ms // 1000 + ttl_seconds
        else:
            ttl = (self._hint(session_id, owner) or self._get(session_id, owner)[0]).ttl
        at = format_timestamp(now_ms)
        digest = codec.fingerprint(name_text, input)
        item = {
            **call_item(session_id, tool_call_id, tool_name, digest, at, ttl),
            **recorded_fields(input_text, output_text, duration_ms, at),
        }
        check_record_size(item, self.item_size_limit)
        plan = PutToolCall(
            self.table_name, session_id, owner, item, ttl_seconds is None, self._remember
        )
        put = self._drive(plan, f"tool record {tool_call_id!r} of session {session_id!r}")
        if put.existing is None:
            return record_from_item(item)  # what this write stored
        existing = put.existing
        record = record_from_item(existing) if state_of(existing) is CallState.RECORDED else None
        if record is None or existing.get("fingerprint") != digest:  # (none: an old record)
            raise ToolCallConflict(record, session_id, tool_call_id)
        return record

    @telemetry.traced("tool_calls")
    def tool_calls(self, session_id: str, *, owner: str | None = None) -> Iterator[ToolCallRecord]:
        """The session's live tool-call history in order of recording, read whole before this
        returns: a GetItem of the metadata item (a missing, expired or foreign session raises),
        then a Query of the ``tool#`` range (one Query from the metadata item would read every
        context page too). Calls claimed but never recorded are left out."""
        _validate_session(session_id, owner)
        self._get(session_id, owner)  # checks the session: live, the caller's
        now_s = self.clock.now_ms() // 1000
        return iter(history(self._items(session_id, schema.TOOL_PREFIX, schema.TOOLS_END), now_s))

    @telemetry.traced("context")
    def context(
        self, session_id: str, *, owner: str | None = None, after: int | None = None
    ) -> ContextReader:
        """Every message of the session's context in order -- or those after seq ``after`` --
        read lazily, page item by page item. From the start: one Query (the metadata item sorts
        first and is checked before anything is returned); from ``after``: a GetItem of the
        metadata item, then a Query from the page holding seq ``after + 1``. A missing, expired
        or foreign session raises here. The reader shows the appends that had begun when it read
        the metadata item; its ``position`` is the seq to pass as ``after`` next time."""
        _validate_session(session_id, owner)
        validate_after(after)
        now_s = self.clock.now_ms() // 1000
        if after is None:
            session, head, items = self._head(session_id, owner, now_s, schema.PAGES_END)
        else:
            session, head = self._get(session_id, owner)
            start = first_page_key(after) or schema.PAGE_PREFIX
            items = self._items(session_id, start, schema.PAGES_END)
        recent = recent_reservations(head, now_s)
        return ContextReader(read_context(session, items, after, now_s, recent), after)

    @telemetry.traced("load")
    def load(self, session_id: str, *, owner: str | None = None) -> Loaded:
        """Metadata, context and live tool-call history from one Query (``metadata`` to the last
        ``tool#`` key, following ``LastEvaluatedKey``): ``Loaded(session, context, tool_calls)``."""
        _validate_session(session_id, owner)
        now_s = self.clock.now_ms() // 1000
        session, head, items = self._head(session_id, owner, now_s, schema.TOOLS_END)
        page_items: list[dict[str, Any]] = []
        call_items: list[dict[str, Any]] = []
        for item in items:
            (page_items if item["sk"].startswith(schema.PAGE_PREFIX) else call_items).append(item)
        records = history(call_items, now_s)
        recent = recent_reservations(head, now_s)
        texts = [text for _, text in read_context(session, page_items, None, now_s, recent)]
        return Loaded(session, Context(tuple(texts)), records)

    def _head(
        self, session_id: str, owner: str | None, now_s: int, high: str
    ) -> tuple[Session, dict[str, Any], Iterator[dict[str, Any]]]:
        """The live session and its item from a Query of its items from the metadata item to
        ``high`` (the attributes item sorts right after it), and the items after those."""
        items = self._items(session_id, schema.META_SK, high)
        head = next(items, None)
        if head is None or head["sk"] != schema.META_SK:
            raise SessionNotFound(session_id)
        session = live(session_id, head, owner, now_s)
        self._remember(session)
        following = next(items, None)
        if following is not None and following["sk"] == schema.ATTRS_SK:
            self._keep_attributes(session_id, stored(following))
        elif following is not None:
            items = itertools.chain((following,), items)
        return self._attach(session), head, items

    def _items(self, session_id: str, low: str, high: str) -> Iterator[dict[str, Any]]:
        """The session's items with ``low <= sk <= high`` in key order, one Query page at a time."""
        e = Expr()
        partition = f"{e.n('pk')} = {e.v(schema.pk(session_id))}"
        key = f"{partition} AND {e.n('sk')} BETWEEN {e.v(low)} AND {e.v(high)}"
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": key,
            "ConsistentRead": True,
            **e.params(),
        }
        while True:
            # A page read lazily, after the operation returned, is measured on its own.
            with telemetry.operation("read_page", session_id, client=self.client):
                response = self._call("query", request)
            for item in response.get("Items", []):
                yield to_python(item) or {}
            if "LastEvaluatedKey" not in response:
                return
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    # ------------------------------------------------------------------ machinery

    def _write(
        self,
        session_id: str,
        owner: str | None,
        edit: Edit,
        *,
        version: int | None,
        expected: bool = False,
        then: Callable[[Session], None] | None = None,
        token: str | None = None,
        wrap: Callable[[MetadataWrite], Plan[None]] | None = None,
    ) -> Session:
        """A write to the metadata item (``locking.MetadataWrite``), pinned to ``version`` or
        last writer wins (None). ``then`` runs on the result before the write's token is given
        up (an append's page write). ``wrap`` makes it part of a transaction (attributes), which
        returns nothing: the session is read back (one Query of the metadata and attributes)."""
        token = self._token() if token is None else token
        seen = self._hint(session_id, owner)
        plan = MetadataWrite(
            self.table_name,
            session_id,
            owner,
            token,
            edit,
            self._remember,
            version=version,
            expected=expected and version is not None,
            seen_tokens=seen.write_tokens if seen is not None else None,
            settled=self._settled.get(session_id, ()),  # one dict read: no lock needed
        )
        what = f"write to session {session_id!r}"
        landed = False
        try:
            if wrap is not None:
                self._drive(wrap(plan), what)
                landed = True
                now_s = self.clock.now_ms() // 1000
                return self._landed(
                    what, lambda: self._head(session_id, owner, now_s, schema.ATTRS_SK)[0]
                )
            session = self._drive(plan, what)
            landed = True
            if then is not None:
                then(session)
            return self._landed(what, lambda: self._attach(session))
        except VersionConflict as exc:  # ConflictRetriesExhausted too
            # With the attributes if they can be had: a failed read must not hide the conflict.
            with contextlib.suppress(SessionStoreError):
                exc.current = self._attach(exc.current)
            raise
        finally:
            # Only a write known to have landed removed what its last attempt named: after any
            # other ending those tokens may still be in ``tk``, and the next write removes them.
            self._settle(session_id, token, plan.removed if landed else ())

    def _settle(self, session_id: str, token: str, removed: tuple[str, ...]) -> None:
        """A write to ``session_id`` has ended: its token is dead; the tokens its landed attempt
        removed are gone."""
        with self._seen_lock:
            tokens = [t for t in self._settled.get(session_id, ()) if key(t) not in removed]
            if token not in tokens:
                tokens.append(token)
            # Past the cap the oldest are forgotten: the horizon removes them in time.
            _keep_recent(self._settled, session_id, tuple(tokens[-TOKEN_CAP:]))

    def _get_item(self, key: dict[str, Any]) -> dict[str, Any] | None:
        request = {"TableName": self.table_name, "Key": key, "ConsistentRead": True}
        return to_python(self._call("get_item", request).get("Item"))

    def _drive(self, plan: Plan[R], what: str) -> R:
        return drive(plan, self._call, self.clock, self.retry, what)

    def _call(self, operation: str, request: dict[str, Any]) -> Any:
        return send(self.client, operation, request, self.table_name, self.item_size_limit)

    def _token(self) -> str:
        return validate_token(self.ids.token())

    def _remember(self, session: Session) -> None:
        session_id = session.session_id
        with self._seen_lock:
            old = self._seen.get(session_id)
            # Another incarnation (the id was reused after TTL removed the session) replaces the
            # hint whatever its version; within one incarnation versions only go up.
            if old is not None and old.incarnation == session.incarnation:
                session = max(session, old, key=lambda copy: copy.version)  # a tie keeps the new
            _keep_recent(self._seen, session_id, session)

    @staticmethod
    def _landed(what: str, read: Callable[[], Session]) -> Session:
        """The session after a write that has landed, read if need be (its attributes): a failed
        read must not make the write look unwritten, or a caller would send it again."""
        try:
            return read()
        except SessionStoreError as exc:
            raise Unavailable(
                f"{what} was applied; reading the session after it failed: {exc}",
                maybe_applied=True,
            ) from exc

    def _keep_attributes(self, session_id: str, attributes: Stored | None) -> None:
        if attributes is not None:
            with self._seen_lock:
                _keep_recent(self._attributes, session_id, attributes)

    def _attach(self, session: Session) -> Session:
        """``session`` (the metadata item alone) with its attributes: none if it never had any,
        this instance's copy if still current, else the attributes item read now (one GetItem;
        it may show a change made after ``session`` was read, never an older one)."""
        if session.attributes_rev == 0:
            return session
        copy = self._attributes.get(session.session_id)  # one dict read: no lock needed
        if (
            copy is None
            or copy.incarnation != session.incarnation
            or copy.rev < session.attributes_rev
        ):
            copy = stored(self._get_item(schema.attrs_key(session.session_id)))
            if copy is None or copy.incarnation != session.incarnation:
                return session  # gone since: TTL removed the session, or it was created again
            self._keep_attributes(session.session_id, copy)
        return dataclasses.replace(session, attributes=copy.attributes, attribute_bytes=copy.bytes)

    def _hint(self, session_id: str, owner: str | None) -> Session | None:
        """The hint for ``session_id`` -- only for its own owner (acting on another owner's hint
        would tell them the session exists), and only while its ttl has not passed (after that
        the id may belong to a new incarnation)."""
        seen = self._seen.get(session_id)  # one dict read: atomic, no lock needed
        if seen is None or seen.owner != owner or seen.ttl <= self.clock.now_ms() // 1000:
            return None
        return seen


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate_session(session_id: str, owner: str | None) -> None:
    validate_id(session_id, "session_id")
    if owner is not None:
        validate_id(owner, "owner")


def _validate_ttl(ttl_seconds: object, idle_seconds: object = None) -> None:
    if not _is_int(ttl_seconds):
        raise InvalidInput("ttl_seconds must be an int (seconds)")
    if not 0 < ttl_seconds <= _MAX_TTL_SECONDS:
        raise InvalidInput(f"ttl_seconds must be in 1..{_MAX_TTL_SECONDS}, got {ttl_seconds}")
    if idle_seconds is not None and not (_is_int(idle_seconds) and 0 < idle_seconds <= ttl_seconds):
        raise InvalidInput(
            f"idle_seconds must be None or an int in 1..ttl_seconds ({ttl_seconds}), "
            f"got {idle_seconds!r}"
        )


def _validate_expected(expected_version: object) -> None:
    if expected_version is not None and not (_is_int(expected_version) and expected_version >= 1):
        raise InvalidInput("expected_version must be a positive int")


def _keep_recent(cache: OrderedDict[str, V], session_id: str, value: V) -> None:
    """``value`` becomes the newest entry; past ``_MAX_HINTS`` entries the oldest is forgotten.
    The caller holds ``_seen_lock``."""
    cache[session_id] = value
    cache.move_to_end(session_id)
    if len(cache) > _MAX_HINTS:
        cache.popitem(last=False)
