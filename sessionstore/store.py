"""SessionStore: the session lifecycle on a few DynamoDB primitives.

Every write is one request on the happy path, and each conflict retry is one more: a failed
condition returns the current item (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), which is
all we need to tell "not found" from "expired" from "wrong status" from "stale version" -- and
whether our own earlier attempt had in fact landed. This module validates arguments and keeps
the version hints; the writes themselves are plans (``sessionstore.writes``) run by the one
attempt driver (``sessionstore.attempts``).
"""

from __future__ import annotations

import itertools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from . import codec, schema, sizing, telemetry
from .attempts import Plan, drive
from .clock import Clock, SystemClock, format_timestamp
from .codec import JSON
from .errors import (
    ContextFull,
    InvalidInput,
    ItemTooLarge,
    RecordMissing,
    SessionNotFound,
    ToolCallConflict,
    Unavailable,
)
from .expressions import to_wire
from .ids import MAX_ID_LENGTH, MAX_TOKEN_LENGTH, IdFactory, RandomIds, validate_id, validate_token
from .metadata_writes import (
    ATTRIBUTES_MAX_BYTES,
    EMPTY_MAP_BYTES,
    SEQ_SPAN,
    TOKEN_CAP,
    AttributesEdit,
    Edit,
    SessionWrite,
    StatusEdit,
    Transition,
    attribute_bytes,
)
from .models import Attributes, Context, Loaded, Session, ToolCallRecord, build_session
from .pages import (
    PAGE_DEADLINE_S,
    AppendEdit,
    ContextReader,
    WritePage,
    first_page_key,
    page_item,
    read_context,
    recent_reservations,
    reservation_entry,
    validate_after,
)
from .retry import RetryPolicy
from .status import Status
from .wire import install_hooks, item_to_wire, send, to_python
from .writes import CreateSession, RecordToolCall, live, tx_attribute

R = TypeVar("R")

_MAX_HINTS = 10_000  # sessions this instance keeps hints (and settled tokens) for
_MAX_TTL_SECONDS = 366 * 86400 * 10  # ten years: anything longer is a units mistake
#: The widest numbers the metadata item can hold: DynamoDB sizes a number by its significant
#: digits, so the reserve must use all-nines, not powers of ten (10**20 is 2 bytes, 9...9 is 11).
_WIDEST_VERSION = int("9" * 20)
_WIDEST_TTL = int("9" * 11)  # epoch seconds past the year 5000
_WIDEST_TTL_WIRE = {"N": str(_WIDEST_TTL)}
# Constant parts of a new metadata item (wire form; botocore never changes its arguments).
_META_SK_WIRE = {"S": schema.META_SK}
_ONE_WIRE = {"N": "1"}
_ZERO_WIRE = {"N": "0"}
_INITIALIZING_WIRE = {"S": Status.INITIALIZING.value}
_EMPTY_MAP_WIRE: dict[str, Any] = {"M": {}}
_WIDEST_COUNT = int("9" * 12)  # ``SEQ_SPAN`` - 1: more messages than any limit allows
_WIDEST_CONTEXT_BYTES = int("9" * 15)
_WIDEST_TOKEN_VALUE = _WIDEST_TTL * SEQ_SPAN + _WIDEST_COUNT
#: Defaults of the context limits (``SessionStore(max_context_messages=, max_context_bytes=)``).
MAX_CONTEXT_MESSAGES = 100_000
MAX_CONTEXT_BYTES = 64 * 2**20
_WIDEST_ATTRIBUTE_BYTES = int("9" * len(str(ATTRIBUTES_MAX_BYTES)))

#: Attribute names: a letter, then letters, digits, ``_ . -``; at most 64 characters.
_ATTRIBUTE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}\Z")
#: Names that would read like the store's own fields (on the item or on ``Session``), refused
#: whatever their case so that ``session.attributes["Status"]`` never passes for the status.
RESERVED_ATTRIBUTE_NAMES = frozenset(
    name.lower()
    for name in (
        *("pk", "sk", "sessionId", "session_id", "version", "status", "owner", "createdAt"),
        *("created_at", "updatedAt", "updated_at", "ttl", "context", "contextBytes"),
        *("messageCount", "message_count"),
        *("context_bytes", "createToken", "incarnation", "attrs", "attributes", "attrBytes"),
        *("attribute_bytes", "tk", "write_tokens"),
    )
)


def _max_metadata_size() -> int:
    """The most bytes a metadata item can take (its context is in pages)."""
    token = "x" * MAX_TOKEN_LENGTH
    widest: dict[str, Any] = {
        "pk": schema.pk("x" * MAX_ID_LENGTH),
        "sk": schema.META_SK,
        "sessionId": "x" * MAX_ID_LENGTH,
        "version": _WIDEST_VERSION,
        "status": max((s.value for s in Status), key=len),
        "owner": "x" * MAX_ID_LENGTH,
        "createdAt": "x" * 24,
        "updatedAt": "x" * 24,
        "ttl": _WIDEST_TTL,
        "messageCount": _WIDEST_COUNT,
        "contextBytes": _WIDEST_CONTEXT_BYTES,
        "createToken": token,
        **{tx_attribute(s): token for s in Status},
        # an append's slot: its token, first seq and time (``pages.AppendEdit.ring_value``)
        **{
            schema.ring_slot(i): reservation_entry(token, _WIDEST_COUNT, _WIDEST_TTL)
            for i in range(schema.RING_SIZE)
        },
        # a string as long as the largest attributes map is sized the same as that map
        "attrs": "x" * ATTRIBUTES_MAX_BYTES,
        "attrBytes": _WIDEST_ATTRIBUTE_BYTES,
        "tk": {
            f"{i:02d}".rjust(MAX_TOKEN_LENGTH, "x"): _WIDEST_TOKEN_VALUE for i in range(TOKEN_CAP)
        },
    }
    return sizing.item_size(item_to_wire(widest))


#: The most bytes a metadata item can take, whatever the session holds: its messages are in
#: page items, so this bounds what every write to it is billed, however long the session.
METADATA_OVERHEAD = _max_metadata_size()


def _max_record_overhead() -> int:
    """The most bytes a tool record can hold besides its tool name, input and output texts."""
    widest_id = "x" * MAX_ID_LENGTH
    recorded_at = format_timestamp(0)  # always 24 characters
    widest: dict[str, Any] = {
        "pk": schema.pk(widest_id),
        "sk": schema.tool_sk(recorded_at, widest_id),
        "sessionId": widest_id,
        "toolCallId": widest_id,
        "toolName": "",
        "input": "",
        "output": "",
        "durationMs": int("9" * 38),  # a number has at most 38 significant digits
        "recordedAt": recorded_at,
        "ttl": _WIDEST_TTL,
    }
    return sizing.item_size(item_to_wire(widest))


#: With at most 4 UTF-8 bytes per character of its three texts, a bound of a record's size.
_RECORD_OVERHEAD = _max_record_overhead()

#: A page holding no message, with the widest seq, ttl and incarnation, for an empty session
#: id and an empty request token.
_EMPTY_PAGE_SIZE = sizing.item_size(
    page_item("", _WIDEST_COUNT, [], _WIDEST_TTL, "", "x" * MAX_TOKEN_LENGTH)
)


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
            ("max_context_messages", max_context_messages, _WIDEST_COUNT),
            ("max_context_bytes", max_context_bytes, _WIDEST_CONTEXT_BYTES),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= top:
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
        # A hint, never the truth: the last copy of each session this instance saw (per
        # incarnation), so the first attempt of a read-modify-write can skip the read, and a
        # write can remove the old tokens it showed in ``tk``. A stale hint costs one retry; it
        # never refuses anything by itself.
        self._seen: OrderedDict[str, Session] = OrderedDict()
        # This instance's finished commuting writes per session: their tokens in ``tk`` are
        # dead, and the next write to the session removes them
        # (``metadata_writes.SessionWrite``).
        self._settled: OrderedDict[str, tuple[str, ...]] = OrderedDict()
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
        attributes: Mapping[str, JSON] | None = None,
    ) -> Session:
        """Create a session in ``initializing`` (one PutItem, if the id is free).

        ``attributes``: its first attributes (see ``update_attributes``)."""
        session_id = self.ids.session_id() if session_id is None else session_id
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        _validate_ttl(ttl_seconds)
        attrs, added = (
            _attribute_texts(attributes, "attributes") if attributes is not None else ({}, 0)
        )
        attr_bytes = EMPTY_MAP_BYTES + added
        if attr_bytes > ATTRIBUTES_MAX_BYTES:
            raise ItemTooLarge(
                EMPTY_MAP_BYTES,
                attr_bytes - EMPTY_MAP_BYTES,
                ATTRIBUTES_MAX_BYTES,
                what="attributes",
            )
        token = self._token()
        now_ms = self.clock.now_ms()
        stamp = format_timestamp(now_ms)
        ttl = now_ms // 1000 + ttl_seconds
        # Built in wire form, and the Session from the same values: nothing is parsed back.
        stamp_wire = {"S": stamp}
        item: dict[str, Any] = {
            "pk": {"S": schema.pk(session_id)},
            "sk": _META_SK_WIRE,
            "sessionId": {"S": session_id},
            "version": _ONE_WIRE,
            "status": _INITIALIZING_WIRE,
            "createdAt": stamp_wire,
            "updatedAt": stamp_wire,
            "ttl": {"N": str(ttl)},
            "messageCount": _ZERO_WIRE,
            "contextBytes": _ZERO_WIRE,
            "createToken": {"S": token},
            "attrs": {"M": {k: {"S": v} for k, v in attrs.items()}},
            "attrBytes": {"N": str(attr_bytes)},
            "tk": _EMPTY_MAP_WIRE,
        }
        if owner is not None:
            item["owner"] = {"S": owner}
        plan = CreateSession(self.table_name, session_id, item, token)
        self._drive(plan, lambda: f"create session {session_id!r}")
        session = build_session(
            session_id,
            1,
            Status.INITIALIZING,
            owner,
            stamp,
            stamp,
            ttl,
            0,
            0,
            token,
            Attributes(attrs),
            attr_bytes,
            {},
            (),
        )
        self._remember(session)
        return session

    @telemetry.traced("get_session")
    def get_session(self, session_id: str, *, owner: str | None = None) -> Session:
        """Strongly consistent read of the metadata item."""
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        return self._get(session_id, owner)[0]

    def _get(self, session_id: str, owner: str | None) -> tuple[Session, dict[str, Any]]:
        """The live session and its item as read (python-typed)."""
        response = self._call(
            "get_item",
            {
                "TableName": self.table_name,
                "Key": schema.meta_key(session_id),
                "ConsistentRead": True,
            },
        )
        item = to_python(response.get("Item"))
        session = live(session_id, item, owner, self.clock.now_ms() // 1000)
        self._remember(session)
        assert item is not None
        return session, item

    # ------------------------------------------------------------------ lifecycle

    @telemetry.traced("transition")
    def transition(self, session_id: str, to: Status, *, owner: str | None = None) -> Session:
        """Move the session to ``to`` if the lifecycle table allows it, in one request.

        The allowed source statuses are part of the condition, so no read is needed; on a
        failure the returned old item says why. Asking for the current status is a no-op.
        """
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        if not isinstance(to, Status):
            raise InvalidInput(f"to must be a Status, not {to!r}")
        plan = Transition(self.table_name, session_id, to, owner, self._token(), self._remember)
        return self._drive(plan, lambda: f"transition of session {session_id!r} to {to.value}")

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
        return self._write(session_id, owner, None, StatusEdit(session_id, status), commutes=False)

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
        (``Session.attributes``): a small map of JSON values -- a protocol version, client info,
        a title, counters -- kept on the metadata item, one request; the version goes up by one.

        Names match ``[A-Za-z][A-Za-z0-9_.-]{0,63}`` and are not the store's own field names;
        values are stored as exact JSON text; all the attributes together take at most
        ``ATTRIBUTES_MAX_BYTES`` (4 KiB, reserved in ``METADATA_OVERHEAD``): ``ItemTooLarge``
        otherwise. Any status but ``closed`` (``SessionNotActive``).

        Without ``expected_version`` the change is applied on top of whatever is current (last
        writer wins per name) and concurrent writers never refuse each other; with it, a
        different current version raises ``VersionConflict(current=...)``.
        """
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        _validate_expected(expected_version)
        texts, added = _attribute_texts(changes, "changes")
        if type(remove) is not tuple and (  # the default: no need to ask the ABC
            isinstance(remove, str | bytes) or not isinstance(remove, Sequence)
        ):
            raise InvalidInput("remove must be a sequence of attribute names")
        for name in remove:
            _validate_attribute_name(name)
        gone = tuple(dict.fromkeys(remove))
        if not texts and not gone:
            raise InvalidInput("changes or remove must name at least one attribute")
        both = set(texts).intersection(gone) if gone else ()
        if both:
            raise InvalidInput(f"attributes both changed and removed: {sorted(both)}")
        if EMPTY_MAP_BYTES + added > ATTRIBUTES_MAX_BYTES:  # could never fit: refuse unsent
            raise ItemTooLarge(EMPTY_MAP_BYTES, added, ATTRIBUTES_MAX_BYTES, what="attributes")
        edit = AttributesEdit(session_id, texts, gone, added)
        return self._write(session_id, owner, expected_version, edit, commutes=True)

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

        Two writes (``sessionstore.pages``): an UpdateItem on the metadata item reserves the
        next seqs under every guard (alive, owner, active, room under ``max_context_messages``
        / ``max_context_bytes``) and bumps the version by one; then a PutItem stores the
        messages as one immutable page. Each is billed by its own size -- the metadata item's
        is bounded (``METADATA_OVERHEAD``), the page's is the messages' -- never by the
        context's: typically 2 + 1 WCU per append at any context length.

        Without ``expected_version`` concurrent appends never refuse each other (they commute);
        with it, another current version raises ``VersionConflict(current=...)``. Raises
        ``ContextFull`` when the limits would be passed (nothing written), ``ItemTooLarge`` when
        the messages could not fit one page, before anything is sent. Returns the metadata item
        as this append left it.

        If the page cannot be written after the reservation (``Unavailable``), the messages are
        not stored and the error says ``maybe_applied=False``: the reserved seqs stay a hole
        that readers skip (``message_count`` counts them).
        """
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise InvalidInput("messages must be a list of JSON values")
        if not messages:
            raise InvalidInput("messages must not be empty")
        _validate_expected(expected_version)
        encoded = _message_texts(messages)
        added = sum(map(sizing.text_size, encoded))
        count = len(encoded)
        if count > self.max_context_messages or added > self.max_context_bytes:
            raise ContextFull(
                session_id, 0, 0, count, added, self.max_context_messages, self.max_context_bytes
            )
        token = self._token()
        # Sized with the widest seq, ttl and incarnation (the real ones are known after the
        # reservation); each message adds its text and 1 byte to the list (``sizing``), the
        # session id and the token their characters (visible ASCII): no need to walk them.
        size = _EMPTY_PAGE_SIZE + len(session_id) + len(token) + added + count
        if size > self.item_size_limit:
            raise ItemTooLarge(0, size, self.item_size_limit, what="context page")
        edit = AppendEdit(
            session_id, count, added, self.max_context_messages, self.max_context_bytes
        )

        reserved = False
        deadline_ms = self.clock.now_ms() + PAGE_DEADLINE_S * 1000

        def write_page(session: Session) -> None:
            nonlocal reserved
            reserved = True
            first = edit.first_seq(session, token)
            item = page_item(session_id, first, encoded, session.ttl, token, session.incarnation)
            self._drive(
                WritePage(self.table_name, session_id, item, token, deadline_ms),
                lambda: f"context page of session {session_id!r}",
            )

        try:
            return self._write(
                session_id,
                owner,
                expected_version,
                edit,
                commutes=True,
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
        """Record one tool call, exactly once, on an active session.

        One ``TransactWriteItems`` (see ``writes.RecordToolCall``): a ConditionCheck on the
        live, active session, the guard ``toolid#<id>`` if absent -- the idempotency key, stable
        across retries, instances and time -- and the record at ``tool#<recordedAt>#<id>`` in
        time order. Cost: one request, 2 WCU per started KB of each of the three items
        (transactional writes cost double), typically 6 WCU. A repeat of a recorded call costs
        the failed transaction plus one GetItem of the original record, and writes nothing.

        The guard keeps a digest of the *request* (tool name + input): a repeat with the same
        request returns the stored record whatever output it brings; a different request under
        the same id raises ``ToolCallConflict``.

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
        check_ttl = ttl_seconds is None  # the record's ttl is the session's: compare it
        if ttl_seconds is not None:
            ttl = now_ms // 1000 + ttl_seconds
        else:
            seen = self._hint(session_id, owner)
            ttl = seen.ttl if seen else self.get_session(session_id, owner=owner).ttl
        recorded_at = format_timestamp(now_ms)
        record_sk = schema.tool_sk(recorded_at, tool_call_id)
        pk = schema.pk(session_id)
        # The items in wire form directly: all but the duration are strings.
        record = {
            "pk": {"S": pk},
            "sk": {"S": record_sk},
            "sessionId": {"S": session_id},
            "toolCallId": {"S": tool_call_id},
            "toolName": {"S": tool_name},
            "input": {"S": input_text},
            "output": {"S": output_text},
            "durationMs": to_wire(duration_ms),
            "recordedAt": {"S": recorded_at},
            "ttl": _WIDEST_TTL_WIRE,  # the plan sets the real one; sized at its widest
        }
        # Sized exactly only when the cheap bound does not already clear the limit.
        texts = len(tool_name) + len(input_text) + len(output_text)
        if _RECORD_OVERHEAD + 4 * texts > self.item_size_limit:
            size = sizing.item_size(record)
            if size > self.item_size_limit:
                raise ItemTooLarge(0, size, self.item_size_limit)
        digest = codec.fingerprint(name_text, input)
        guard = {
            "pk": {"S": pk},
            "sk": {"S": schema.guard_sk(tool_call_id)},
            "toolCallId": {"S": tool_call_id},
            "recordSk": {"S": record_sk},
            "fingerprint": {"S": digest},
        }
        plan = RecordToolCall(
            self.table_name, session_id, owner, record, guard, ttl, check_ttl, self._remember
        )
        recorded = self._drive(
            plan, lambda: f"tool record {tool_call_id!r} of session {session_id!r}"
        )
        if recorded.guard is None:
            # This write stored ``record``: the result is what it sent, not parsed back from it.
            return ToolCallRecord(
                session_id,
                tool_call_id,
                tool_name,
                codec.decode(input_text),
                codec.decode(output_text),
                int(duration_ms),
                recorded_at,
                int(record["ttl"]["N"]),
            )
        stored = self._stored_record(session_id, tool_call_id, recorded.guard)
        if recorded.guard["fingerprint"] != digest:
            raise ToolCallConflict(stored)
        return stored

    def _stored_record(
        self, session_id: str, tool_call_id: str, guard: dict[str, Any]
    ) -> ToolCallRecord:
        response = self._call(
            "get_item",
            {
                "TableName": self.table_name,
                "Key": {"pk": {"S": schema.pk(session_id)}, "sk": {"S": guard["recordSk"]}},
                "ConsistentRead": True,
            },
        )
        item = to_python(response.get("Item"))
        if item is None:
            raise RecordMissing(session_id, tool_call_id)
        return ToolCallRecord.from_item(item)

    @telemetry.traced("tool_calls")
    def tool_calls(self, session_id: str, *, owner: str | None = None) -> Iterator[ToolCallRecord]:
        """The session's tool-call history in order of first recording, page by page.

        Two requests at least: the metadata item (GetItem, to check the session), then a Query
        of the ``tool#`` range (the context pages sort between the two, so one Query would read
        them all). The first page is read before this returns, so a missing, expired or foreign
        session raises here, not at the first ``next()``. Records whose ttl has passed are left
        out: DynamoDB deletes them late and one at a time, so what a reader sees must not depend
        on when its sweeper ran.
        """
        self.get_session(session_id, owner=owner)
        now_s = self.clock.now_ms() // 1000
        items = self._items(session_id, schema.TOOL_PREFIX, schema.TOOLS_END)
        first = next(items, None)

        def records() -> Iterator[ToolCallRecord]:
            if first is not None:
                yield from _live_records(itertools.chain((first,), items), now_s)

        return records()

    @telemetry.traced("context")
    def context(
        self, session_id: str, *, owner: str | None = None, after: int | None = None
    ) -> ContextReader:
        """Every message of the session's context in order -- or those after seq ``after`` --
        read lazily, page item by page item, following the Query's pagination.

        From the start: one Query (the metadata item sorts first and is checked before anything
        is returned). From ``after``: a GetItem of the metadata item, then a Query that starts at
        the page holding seq ``after + 1``. A missing, expired or foreign session raises here.
        The reader shows the appends that had begun when it read the metadata item (a snapshot;
        see ``pages.read_context``); its ``position`` is the seq to pass as ``after`` next time.
        """
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        validate_after(after)
        now_s = self.clock.now_ms() // 1000
        if after is None:
            items = self._items(session_id, schema.META_SK, schema.PAGES_END)
            session, head = self._head(items, session_id, owner, now_s)
        else:
            session, head = self._get(session_id, owner)
            start = first_page_key(session, after) or schema.PAGE_PREFIX
            items = self._items(session_id, start, schema.PAGES_END)
        recent = recent_reservations(head, now_s)
        return ContextReader(read_context(session, items, after, now_s, recent), after)

    @telemetry.traced("load")
    def load(self, session_id: str, *, owner: str | None = None) -> Loaded:
        """Metadata, context and live tool-call history from one Query (``metadata`` to the last
        ``tool#`` key, following ``LastEvaluatedKey``): ``Loaded(session, context, tool_calls)``."""
        validate_id(session_id, "session_id")
        _validate_owner(owner)
        now_s = self.clock.now_ms() // 1000
        items = self._items(session_id, schema.META_SK, schema.TOOLS_END)
        session, head = self._head(items, session_id, owner, now_s)
        page_items: list[dict[str, Any]] = []
        record_items: list[dict[str, Any]] = []
        for item in items:
            (page_items if item["sk"].startswith(schema.PAGE_PREFIX) else record_items).append(item)
        records = list(_live_records(record_items, now_s))
        recent = recent_reservations(head, now_s)
        texts = [text for _, text in read_context(session, page_items, None, now_s, recent)]
        return Loaded(session, Context(tuple(texts)), records)

    def _head(
        self, items: Iterator[dict[str, Any]], session_id: str, owner: str | None, now_s: int
    ) -> tuple[Session, dict[str, Any]]:
        """The live session from the first item of a Query that starts at the metadata item."""
        head = next(items, None)
        if head is None or head["sk"] != schema.META_SK:
            raise SessionNotFound(session_id)
        session = live(session_id, head, owner, now_s)
        self._remember(session)
        return session, head

    def _items(self, session_id: str, low: str, high: str) -> Iterator[dict[str, Any]]:
        """The items of one session with ``low <= sk <= high`` in key order, strongly
        consistent, one Query page at a time (python-typed)."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "#pk = :pk AND #sk BETWEEN :low AND :high",
            "ExpressionAttributeNames": {"#pk": "pk", "#sk": "sk"},
            "ExpressionAttributeValues": {
                ":pk": {"S": schema.pk(session_id)},
                ":low": {"S": low},
                ":high": {"S": high},
            },
            "ConsistentRead": True,
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
        expected: int | None,
        edit: Edit,
        *,
        commutes: bool,
        then: Callable[[Session], None] | None = None,
        token: str | None = None,
    ) -> Session:
        """A write to the metadata item (``metadata_writes.SessionWrite``). A commuting edit without
        ``expected`` needs no version; otherwise the first attempt is pinned to the caller's
        version, this instance's hint, or -- on a cold instance -- one read. ``then`` runs on
        the result before the write's token is given up (an append's page write)."""
        token = self._token() if token is None else token
        seen = self._hint(session_id, owner)
        version: int | None
        if expected is not None:
            version = expected
        elif commutes:
            version = None  # no version needed
        elif seen is not None:
            version = seen.version
        else:
            current = self.get_session(session_id, owner=owner)
            done = edit.judge(current)
            if done is not None:
                return done
            version = current.version
        settled = self._settled.get(session_id, ())  # one dict read: atomic, no lock needed
        plan = SessionWrite(
            self.table_name,
            session_id,
            owner,
            token,
            edit,
            self._remember,
            commutes=commutes,
            version=version,
            expected=expected,
            seen_tokens=seen.write_tokens if seen is not None else None,
            settled=settled,
        )
        try:
            session = self._drive(plan, lambda: f"write to session {session_id!r}")
            if then is not None:
                then(session)
            return session
        finally:
            if plan.named or plan.removed:
                self._settle(session_id, token if plan.named else None, plan.removed)

    def _settle(self, session_id: str, token: str | None, removed: tuple[str, ...]) -> None:
        """A write to ``session_id`` has ended: its token (if it named one in ``tk``) is dead;
        the tokens its landed attempt removed are gone."""
        with self._seen_lock:
            settled = self._settled
            tokens = settled.get(session_id, ())
            if removed:
                tokens = tuple([t for t in tokens if t not in removed])
            if token is not None and token not in tokens:
                # Past the cap the oldest are forgotten: the horizon removes them in time.
                tokens = (*tokens[1 - TOKEN_CAP :], token)
            if not tokens:
                settled.pop(session_id, None)
                return
            settled[session_id] = tokens
            settled.move_to_end(session_id)
            if len(settled) > _MAX_HINTS:
                settled.popitem(last=False)

    def _drive(self, plan: Plan[R], what: str | Callable[[], str]) -> R:
        return drive(plan, self._call, self.clock, self.retry, what)

    def _call(self, operation: str, request: dict[str, Any]) -> Any:
        return send(self.client, operation, request, self.table_name, self.item_size_limit)

    def _token(self) -> str:
        return validate_token(self.ids.token())

    def _remember(self, session: Session) -> None:
        session_id = session.session_id
        with self._seen_lock:
            seen = self._seen
            old = seen.get(session_id)
            # Another incarnation (the id was reused after TTL removed the session) replaces the
            # hint whatever its version; within one incarnation versions only go up.
            if old is None:
                seen[session_id] = session
                if len(seen) > _MAX_HINTS:
                    seen.popitem(last=False)
                return
            if old.incarnation != session.incarnation or old.version <= session.version:
                seen[session_id] = session
            seen.move_to_end(session_id)

    def _hint(self, session_id: str, owner: str | None) -> Session | None:
        """The hint for ``session_id`` -- only for its own owner (acting on another owner's hint
        would tell them the session exists), and only while its ttl has not passed (after that
        the id may belong to a new incarnation)."""
        seen = self._seen.get(session_id)  # one dict read: atomic, no lock needed
        if seen is None or seen.owner != owner or seen.ttl <= self.clock.now_ms() // 1000:
            return None
        return seen


def _live_records(items: Iterable[dict[str, Any]], now_s: int) -> Iterator[ToolCallRecord]:
    """The records among ``items`` whose ttl has not passed: DynamoDB deletes them late and one
    at a time, so what a reader sees must not depend on when its sweeper ran."""
    for item in items:
        if int(item["ttl"]) > now_s:
            yield ToolCallRecord.from_item(item)


_MESSAGE_LABEL = "messages[{}]"
_ATTRIBUTE_LABEL = "{}[{!r}]"


def _message_texts(messages: Sequence[JSON]) -> list[str]:
    """Each message's exact JSON text; the label that names a bad one is made only then."""
    return [codec.encode(m, partial(_MESSAGE_LABEL.format, i)) for i, m in enumerate(messages)]


def _validate_ttl(ttl_seconds: object) -> None:
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int):
        raise InvalidInput("ttl_seconds must be an int (seconds)")
    if not 0 < ttl_seconds <= _MAX_TTL_SECONDS:
        raise InvalidInput(f"ttl_seconds must be in 1..{_MAX_TTL_SECONDS}, got {ttl_seconds}")


def _validate_owner(owner: object) -> None:
    if owner is not None:
        validate_id(owner, "owner")


def _validate_expected(expected_version: object) -> None:
    if expected_version is not None and (
        isinstance(expected_version, bool)
        or not isinstance(expected_version, int)
        or expected_version < 1
    ):
        raise InvalidInput("expected_version must be a positive int")


def _validate_attribute_name(name: object) -> str:
    if not isinstance(name, str) or _ATTRIBUTE_NAME.match(name) is None:
        raise InvalidInput(
            f"attribute names must match [A-Za-z][A-Za-z0-9_.-]{{0,63}}, got {name!r:.80}"
        )
    if name.lower() in RESERVED_ATTRIBUTE_NAMES:
        raise InvalidInput(f"attribute name {name!r} is one of the store's own fields")
    return name


def _attribute_texts(values: object, what: str) -> tuple[dict[str, str], int]:
    """Validated names -> exact JSON text of each value, and the bytes they add to the map
    (``attribute_bytes``)."""
    if type(values) is not dict and not isinstance(values, Mapping):  # dict: no ABC check
        raise InvalidInput(f"{what} must be a mapping of attribute names to JSON values")
    texts: dict[str, str] = {}
    added = 0
    for name, value in values.items():
        _validate_attribute_name(name)
        text = codec.encode(value, partial(_ATTRIBUTE_LABEL.format, what, name))
        texts[name] = text
        added += attribute_bytes(name, text)
    return texts, added
