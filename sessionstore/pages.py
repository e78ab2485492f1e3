"""Context pages: a session's messages, one immutable item per append.

An append is two writes (``SessionStore.append_context``):

1. the metadata item reserves the seqs -- ``messageCount`` goes up by the number of messages,
   under every guard of a metadata write (alive, owner, active, room left, the request token in
   ``tk``; ``metadata_writes.AppendEdit``);
2. ``WritePage`` puts the page ``msg#<last seq>`` holding them, with the session's ttl.

Why not one transaction: a transactional write costs 2 WCU per started KB of *each* item, so
meta + page costs at least 4 WCU however small both are; the two plain writes cost 1 per KB of
each (typically 2 + 1). The price is that the two can come apart, and readers are written for
it (``read_context``):

* a page lands after its reservation, so a reader can find a seq reserved and its page not yet
  there (an append in flight), or never there (the append failed between its two steps and
  said so: ``Unavailable(maybe_applied=False)``, the messages were not stored). The metadata
  item tells the two apart: an append's ``tk`` entry holds its first seq and its time. A reader
  stops before a hole that a recent append (``IN_FLIGHT_S``) reserved -- so what it shows is
  always a prefix of what the context will be, and reading on from ``position`` later misses
  nothing -- and skips an older hole. It never shows a message twice;
* a lost response on step 1 is settled by the token (its ``tk`` entry says which seqs the
  landed attempt reserved, so the page goes where it belongs, once); on step 2 by the page's own
  ``token`` (a refused re-send that finds it means ours landed). Neither duplicates or drops a
  page.

Pages never change and are never deleted by the store: TTL removes them with the session.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from . import schema
from .codec import JSON, decode
from .errors import (
    ContextFull,
    DynamoDBError,
    InvalidInput,
    SessionNotActive,
    SessionStoreError,
    Unavailable,
)
from .expressions import Expr
from .metadata_writes import SEQ_SPAN, token_seq, token_time
from .models import Session
from .status import Status
from .wire import Cancelled, ConditionFailed
from .writes import gave_up, ring_entries

#: A page's attribute names (they count in every page's size).
FIRST = "first"  # the seq of its first message
MESSAGES = "messages"  # the messages' JSON text, in order
TOKEN = "token"  # the append's request token
INCARNATION = "createToken"  # the session's (``Session.incarnation``): pages of an earlier
# session under the same id are told apart by it, not only by a ttl compared with our clock

#: A hole whose reservation is younger than this (seconds) may still be filled: readers stop
#: before it. A page follows its reservation at once; only botocore's retries delay it, and
#: a reservation whose page never came is skipped after this long.
IN_FLIGHT_S = 120
#: A page is not sent once this long (seconds, by the writer's clock) has passed since its
#: append began: readers must still be waiting for it when it lands. Half the window leaves the
#: other half for clock skew between writer and reader and for the request's own time.
PAGE_DEADLINE_S = IN_FLIGHT_S // 2


def page_item(
    session_id: str, first: int, messages: list[str], ttl: int, token: str, incarnation: str
) -> dict[str, Any]:
    """The page item, low-level."""
    return {
        "pk": {"S": schema.pk(session_id)},
        "sk": {"S": schema.page_sk(first + len(messages) - 1)},
        FIRST: {"N": str(first)},
        MESSAGES: {"L": [{"S": m} for m in messages]},
        "ttl": {"N": str(ttl)},
        TOKEN: {"S": token},
        INCARNATION: {"S": incarnation},
    }


class AppendEdit:
    """``append_context``, its first step: reserve the next ``count`` seqs of an active session
    whose context has room, and count the bytes -- the messages themselves go to a page item
    afterwards (``pages.WritePage``), so this write's size never depends on the context's.

    ``messageCount`` only grows, so the room condition needs no exact item and appends commute.
    The seqs reserved are ``[messageCount before, messageCount after)``: a commuting attempt
    keeps the first one in its ``tk`` entry (``SEQ_SPAN``), so a lost response still tells
    which seqs the landed attempt got; a pinned attempt is built on the exact item and knows it.
    """

    __slots__ = ("added", "count", "max_bytes", "max_messages", "pinned_seq", "session_id")

    named_when_expected = True

    def __init__(
        self,
        session_id: str,
        count: int,
        added: int,
        max_messages: int,
        max_bytes: int,
    ) -> None:
        self.session_id = session_id
        self.count = count
        self.added = added
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.pinned_seq: int | None = None  # the first seq of the last pinned attempt

    def clauses(self, e: Expr, exact: Session | None) -> tuple[str, str, str]:
        e.names.update(_NAMES)
        values = e.values
        values[":n"] = {"N": str(self.count)}
        values[":added"] = {"N": str(self.added)}
        values[":zero"] = _ZERO
        values[":roomn"] = {"N": str(self.max_messages - self.count)}
        values[":roomb"] = {"N": str(self.max_bytes - self.added)}
        values[":active"] = _ACTIVE
        if exact is not None:
            self.pinned_seq = exact.paged_count
        return _RESERVE, "", _ROOM

    def token_value(self, e: Expr, now_s: int) -> str:
        e.values[":stamp"] = {"N": str(now_s * SEQ_SPAN)}
        return "if_not_exists(#messageCount, :zero) + :stamp"

    def ring_value(self, token: str, now_s: int) -> str:
        # A pinned attempt is built on the exact item: its seq is known. Readers see it here.
        assert self.pinned_seq is not None
        return reservation_entry(token, self.pinned_seq, now_s)

    def judge(self, current: Session) -> Session | None:
        if current.status is not Status.ACTIVE:
            raise SessionNotActive(self.session_id, current.status)
        if (
            current.paged_count + self.count > self.max_messages
            or current.context_bytes + self.added > self.max_bytes
        ):
            raise ContextFull(
                self.session_id,
                current.paged_count,
                current.context_bytes,
                self.count,
                self.added,
                self.max_messages,
                self.max_bytes,
            )
        return None

    def needs_exact(self, current: Session) -> bool:
        return False

    def first_seq(self, session: Session, token: str) -> int:
        """The first (paged) seq the landed attempt reserved; ``session`` is what it returned."""
        tokens = session.write_tokens
        if tokens is not None and token in tokens:
            return token_seq(int(tokens[token]))
        assert self.pinned_seq is not None  # not named, so a pinned attempt landed
        return self.pinned_seq


_NAMES = {
    "#messageCount": "messageCount",
    "#contextBytes": "contextBytes",
    "#status": "status",
}
# ``if_not_exists``: a session from before context pages has no ``messageCount`` (its inline
# messages come first; pages count from 0 after them).
_RESERVE = (
    "#messageCount = if_not_exists(#messageCount, :zero) + :n, "
    "#contextBytes = #contextBytes + :added"
)
_ROOM = (
    "#status = :active AND #contextBytes <= :roomb "
    "AND (attribute_not_exists(#messageCount) OR #messageCount <= :roomn)"
)
_ACTIVE = {"S": Status.ACTIVE.value}
_ZERO = {"N": "0"}


class WritePage:
    """PutItem of one page, if its key is free -- or held by a page of an earlier session under
    the same id (another incarnation, or a ttl that has passed: TTL deletes late). A refusal
    that finds our token means our lost attempt landed. Not sent after ``deadline_ms``
    (``PAGE_DEADLINE_S``): ``Unavailable``, and the driver says whether an earlier attempt may
    have landed."""

    __slots__ = ("deadline_ms", "item", "session_id", "table", "token")

    operation = "put_item"

    def __init__(
        self, table: str, session_id: str, item: dict[str, Any], token: str, deadline_ms: int
    ) -> None:
        self.session_id = session_id
        self.token = token
        self.table = table
        self.item = item
        self.deadline_ms = deadline_ms

    def request(self, now_ms: int) -> dict[str, Any]:
        if now_ms > self.deadline_ms:
            raise Unavailable(
                f"context page of session {self.session_id!r}: not sent, "
                f"{PAGE_DEADLINE_S} s after the append began readers may have stopped waiting "
                "for it; the messages were not stored by this attempt",
                maybe_applied=False,
            )
        return {
            "TableName": self.table,
            "Item": self.item,
            "ConditionExpression": ("attribute_not_exists(#pk) OR #ttl <= :nows OR #inc <> :inc"),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "ExpressionAttributeNames": {"#pk": "pk", "#ttl": "ttl", "#inc": INCARNATION},
            "ExpressionAttributeValues": {
                ":nows": {"N": str(now_ms // 1000)},
                ":inc": self.item[INCARNATION],
            },
        }

    def succeeded(self, response: dict[str, Any]) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> None:
        assert isinstance(failure, ConditionFailed)
        old = failure.old
        if old is not None and old.get(TOKEN) == self.token:
            return None  # our lost attempt had landed
        # A live page under a seq the metadata item gave us: something wrote outside the store.
        raise DynamoDBError(
            "ConditionalCheckFailedException",
            f"page {self.item['sk']['S']!r} of session {self.session_id!r} is held by another "
            f"write (token {None if old is None else old.get(TOKEN)!r})",
        )

    def maybe_landed(self) -> None:
        pass

    def exhausted(self, attempts: int) -> SessionStoreError:
        return gave_up(f"context page of session {self.session_id!r}", attempts)


class ContextReader(Iterator[JSON]):
    """The messages of a session's context in order, read lazily (``SessionStore.context``).

    ``position`` is the seq of the last message handed out (or the ``after`` it started from,
    None before the first): pass it as ``after`` to read on from there later.
    """

    def __init__(self, texts: Iterator[tuple[int, str]], after: int | None) -> None:
        self._texts = texts
        self.position = after

    def __iter__(self) -> ContextReader:
        return self

    def __next__(self) -> JSON:
        seq, text = next(self._texts)
        self.position = seq
        return decode(text)


def validate_after(after: object) -> int | None:
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
        raise InvalidInput("after must be None or a seq (an int >= 0)")
    return after


def first_page_key(session: Session, after: int | None) -> str | None:
    """Where a page Query starts for messages after ``after``: the key of the page that holds
    seq ``after + 1`` is the first one at or above ``msg#<after + 1>`` (pages are keyed by their
    last seq). None: start with the first page."""
    inline = len(session.inline_context)
    if after is None or after + 1 <= inline:
        return None
    return schema.page_sk(after + 1 - inline)


def read_context(
    session: Session,
    page_items: Iterable[dict[str, Any]],
    after: int | None,
    now_s: int,
    recent: list[int],
) -> Iterator[tuple[int, str]]:
    """``(seq, JSON text)`` of every message after ``after`` in the context as ``session`` (the
    metadata item read first) counts it: the inline messages of a session from before pages,
    then the pages in key order (python-typed items, as they come from the Query). ``recent``:
    ``recent_reservations`` of that metadata item.

    Only seqs the metadata item had reserved when it was read are shown, so a read is a
    snapshot of the appends that had begun by then. At a hole whose reservation is recent (an
    append in flight) the read ends; an older hole (an append that failed between its two
    writes) is skipped. Pages of another incarnation or whose ttl has passed belong to an
    earlier session under the same id, not yet swept: left out.
    """
    inline = session.inline_context
    offset = len(inline)
    start = -1 if after is None else after
    for seq, text in enumerate(inline):
        if seq > start:
            yield seq, text
    reserved = session.paged_count
    expected = max(0, start + 1 - offset)  # the paged seq the next page should start at
    incarnation = session.incarnation
    for item in page_items:
        if int(item["ttl"]) <= now_s or item.get(INCARNATION, incarnation) != incarnation:
            continue
        first = int(item[FIRST])
        if first >= reserved:
            return  # reserved after the metadata item was read: not in this snapshot
        if first > expected and any(expected <= r < first for r in recent):
            return  # an append in flight: what follows the hole waits for it
        messages = item[MESSAGES]
        for i, text in enumerate(messages):
            seq = offset + first + i
            if seq > start and first + i < reserved:
                yield seq, text
        expected = first + len(messages)


def reservation_entry(token: str, first_seq: int, now_s: int) -> str:
    """A pinned append's ring slot: its token, the first seq it reserved, its time."""
    return f"{token} {first_seq} {now_s}"


def recent_reservations(item: dict[str, Any], now_s: int) -> list[int]:
    """First seqs of the appends that reserved them less than ``IN_FLIGHT_S`` ago, from the
    metadata item (python-typed): commuting appends name theirs in ``tk`` (other writes' entries
    hold a bare time, below ``SEQ_SPAN``), pinned ones in their ring slot (``token seq time``)."""
    horizon = now_s - IN_FLIGHT_S
    seqs = [
        token_seq(v)
        for value in (item.get("tk") or {}).values()
        if (v := int(value)) >= SEQ_SPAN and token_time(v) > horizon
    ]
    seqs += [int(seq) for _, seq, at in _reservation_entries(item) if int(at) > horizon]
    return seqs


def _reservation_entries(item: dict[str, Any]) -> list[list[str]]:
    return [entry for entry in ring_entries(item) if len(entry) == 3]
