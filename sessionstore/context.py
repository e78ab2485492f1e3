"""Context accumulation: a session's messages, one immutable page item per append.

Layer: a pattern module, over ``locking`` (the reservation is a write of the metadata item) and
``reads`` (a read starts from the metadata item).

An append is two writes (``append``):

1. ``AppendEdit`` reserves the seqs on the metadata item -- ``messageCount`` goes up by the
   number of messages, under every guard of a metadata write (alive, owner, active, room left,
   the request token in ``tk``), last writer wins: concurrent appends never refuse each other;
2. ``WritePage`` puts the page ``msg#<last seq>`` holding them, with the session's ttl.

Why not one transaction: it costs 2 WCU per started KB of *each* item, at least 4 however
small both are; the two plain writes cost 1 per KB of each (typically 2 + 1). The price is that
the two can come apart, and ``read_context`` is written for it:

* a reader can find a seq reserved and its page not yet there (an append in flight), or never
  there (the append failed between its two steps and said so:
  ``Unavailable(maybe_applied=False)``). The append's ``tk`` entry, holding its first seq and
  its time, tells the two apart. A reader stops before a hole reserved less than
  ``IN_FLIGHT_S`` ago -- so it always shows a prefix of what the context will be, and reading
  on from ``position`` later misses nothing -- and skips an older hole. It never shows a
  message twice;
* a lost response is settled by the token (``first_seq``, ``WritePage.refused``): no page is
  duplicated or dropped.

Pages never change and are never deleted by the store: TTL removes them with the session.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from . import locking, reads, schema, sizing, validate
from .codec import JSON, decode
from .conditions import (
    Clause,
    Condition,
    Field,
    Name,
    Update,
    Value,
    absent,
    clause,
    put_item,
    set_,
)
from .errors import ContextFull, DynamoDBError, ItemTooLarge, SessionNotActive, Unavailable
from .ids import MAX_TOKEN_LENGTH
from .item import Meta
from .models import Session, Status
from .table import PageScope, Plan, Table
from .wire import Cancelled, ConditionFailed, send_by
from .write_tokens import SEQ_SPAN, key, token_seq, token_time

__all__ = ["AppendEdit", "ContextReader", "Limits", "PageItem", "WritePage", "append", "read"]


class PageItem(Field):
    """A page item's attributes (they count in every page's size)."""

    PK = "pk"
    SK = "sk"
    FIRST = "first"  # the seq of its first message
    MESSAGES = "messages"  # the messages' JSON text, in order
    TTL = "ttl"
    TOKEN = "token"  # the append's request token
    # The session's (``Session.incarnation``): pages of an earlier session under the same id are
    # told apart by it, not only by a ttl compared with our clock.
    INCARNATION = "incarnation"


#: A hole whose reservation is younger than this (seconds) may still be filled: readers stop
#: before it. A page follows its reservation at once; only botocore's retries delay it, and
#: a reservation whose page never came is skipped after this long.
IN_FLIGHT_S = 120
#: A writer may send its page for at least this long (seconds, by its clock) after reserving.
PAGE_DEADLINE_S = 60
#: The clock skew between a writer and its readers that the window allows for (seconds).
SKEW_S = 30

# Readers must still be waiting when a page lands, and a request may land up to the client's
# connect and read timeouts after it is sent (``Table.landing_s``). So the last send (each of
# botocore's attempts, checked as it is sent: ``wire.send_by``) is ``IN_FLIGHT_S - SKEW_S -
# landing`` after the time the reservation states in ``tk``; a client with long timeouts states a
# later time (``stated_delay``), so readers wait longer for its holes. The timeouts bound each
# socket operation, not a whole request: the skew allowance is the margin.


def stated_delay(landing: int) -> int:
    """How much later than its real time a reservation states in ``tk`` (seconds)."""
    return max(0, PAGE_DEADLINE_S + landing + SKEW_S - IN_FLIGHT_S)


def send_by_ms(entry: int, landing: int) -> int:
    """The last time (epoch ms) a page may be sent, from its reservation's ``tk`` entry."""
    return (token_time(entry) + IN_FLIGHT_S - SKEW_S - landing) * 1000


def page_item(
    session_id: str, first: int, messages: list[str], ttl: int, token: str, incarnation: str
) -> dict[str, Any]:
    """The page item, low-level."""
    return {
        PageItem.PK: {"S": schema.pk(session_id)},
        PageItem.SK: {"S": schema.page_sk(first + len(messages) - 1)},
        PageItem.FIRST: {"N": str(first)},
        PageItem.MESSAGES: {"L": [{"S": m} for m in messages]},
        PageItem.TTL: {"N": str(ttl)},
        PageItem.TOKEN: {"S": token},
        PageItem.INCARNATION: {"S": incarnation},
    }


@dataclass(frozen=True, slots=True)
class AppendEdit:
    """The reservation (an ``Edit`` for ``locking.write``): the next ``count`` seqs of an
    active session whose context has room, and the bytes counted. ``messageCount`` only grows,
    so the room condition needs no exact item. The seqs reserved are ``[messageCount before,
    messageCount after)``; the first is kept in the token's entry."""

    session_id: str
    count: int
    added: int
    max_messages: int
    max_bytes: int
    delay_s: int = 0  # ``stated_delay``: how much later than now the entry states

    def update(self) -> Update:
        count, size = Name(Meta.MESSAGE_COUNT), Name(Meta.CONTEXT_BYTES)
        return set_("reserve", "{} = {} + {}", count, count, Value(self.count)) + set_(
            "count_bytes", "{} = {} + {}", size, size, Value(self.added)
        )

    def condition(self) -> Condition:
        active = clause("status_is", "{} = {}", Name(Meta.STATUS), Value(Status.ACTIVE.value))
        room = clause(
            "room", "{} <= {}", Name(Meta.MESSAGE_COUNT), Value(self.max_messages - self.count)
        ) & clause(
            "room_bytes", "{} <= {}", Name(Meta.CONTEXT_BYTES), Value(self.max_bytes - self.added)
        )
        return active & room

    def token_value(self, now_s: int) -> Clause:
        # The count before this write is the first seq it reserves (SET reads the old item).
        stated = (now_s + self.delay_s) * SEQ_SPAN
        return Clause("reservation", "{} + {}", (Name(Meta.MESSAGE_COUNT), Value(stated)))

    def judge(self, current: Session) -> Session | None:
        if current.status is not Status.ACTIVE:
            raise SessionNotActive(self.session_id, current.status)
        count, size = current.message_count, current.context_bytes
        if count + self.count > self.max_messages or size + self.added > self.max_bytes:
            limits = (self.max_messages, self.max_bytes)
            raise ContextFull(self.session_id, count, size, self.count, self.added, *limits)
        return None


def first_seq(session: Session, token: str) -> int:
    """The first seq the landed reservation named ``token`` got; ``session`` is the item it
    left (or a later copy: the entry stays until the write has ended)."""
    return token_seq(session.write_tokens[key(token)])


@dataclass(frozen=True, slots=True)
class WritePage(Plan[None]):
    """PutItem of one page, if its key is free -- or held by a page of an earlier session under
    the same id (another incarnation, or a ttl that has passed: TTL deletes late). A refusal
    that finds our token means our lost attempt landed. Not sent after ``deadline_ms``
    (``send_by_ms``; nor are botocore's own attempts, ``wire.send_by``): ``Unavailable``, and
    the driver says whether an earlier attempt may have landed."""

    table: str
    session_id: str
    item: dict[str, Any]
    token: str
    deadline_ms: int

    operation: ClassVar[str] = "put_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        if now_ms > self.deadline_ms:
            raise Unavailable(
                f"context page of session {self.session_id!r}: not sent, its send-by time "
                "had passed and readers may have stopped waiting for it; the messages were not "
                "stored by this attempt",
                maybe_applied=False,
            )
        incarnation = self.item[PageItem.INCARNATION]["S"]
        free = (
            absent(PageItem.PK)
            | clause("ttl_passed", "{} <= {}", Name(PageItem.TTL), Value(now_ms // 1000))
            | clause(
                "other_incarnation", "{} <> {}", Name(PageItem.INCARNATION), Value(incarnation)
            )
        )
        return put_item(self.table, self.item, free)

    def succeeded(self, response: dict[str, Any], now_ms: int) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> None:
        assert isinstance(failure, ConditionFailed)
        old = failure.old
        if old is not None and old.get(PageItem.TOKEN) == self.token:
            return None  # our lost attempt had landed
        # A live page under a seq the metadata item gave us: something wrote outside the store.
        raise DynamoDBError(
            "ConditionalCheckFailedException",
            f"page {self.item[PageItem.SK]['S']!r} of session {self.session_id!r} is held by "
            f"another write (token {None if old is None else old.get(PageItem.TOKEN)!r})",
        )


@dataclass(frozen=True, slots=True)
class Limits:
    """A store's bounds of each session's context."""

    max_messages: int
    max_bytes: int


def append(
    table: Table,
    limits: Limits,
    session_id: str,
    messages: Sequence[JSON],
    expected_version: int | None,
    owner: str | None,
) -> Session:
    """Reserve the seqs (one UpdateItem), then put the page (one PutItem)."""
    encoded = validate.messages(messages)
    validate.expected_version(expected_version)
    added, count = sum(map(sizing.text_size, encoded)), len(encoded)
    if count > limits.max_messages or added > limits.max_bytes:
        raise ContextFull(session_id, 0, 0, count, added, limits.max_messages, limits.max_bytes)
    token = table.token()
    size = page_size(session_id, token, encoded)
    if size > table.item_size_limit:
        raise ItemTooLarge(0, size, table.item_size_limit, what="context page")
    landing = table.landing_s
    edit = AppendEdit(
        session_id, count, added, limits.max_messages, limits.max_bytes, stated_delay(landing)
    )
    try:
        with reads.on_conflict(table):
            wrote = locking.write(
                table, session_id, owner, edit, version=expected_version, expected=True, token=token
            )
    except Unavailable as exc:
        if not exc.maybe_applied:
            raise
        # Only the reservation may have landed; the page was never sent.
        raise Unavailable(
            f"append to session {session_id!r}: {exc}; the messages were not stored "
            "(a reservation may have landed, leaving a hole that readers skip)",
            maybe_applied=False,
        ) from exc
    session = wrote.session
    try:
        entry = session.write_tokens[key(token)]
        item = page_item(
            session_id, token_seq(entry), encoded, session.ttl, token, session.incarnation
        )
        # Sent, botocore's own retries included, only while readers will still wait for it.
        deadline_ms = send_by_ms(entry, landing)
        with send_by(lambda: table.now_ms() > deadline_ms):
            plan = WritePage(table.name, session_id, item, token, deadline_ms)
            table.drive(plan, f"context page of session {session_id!r}")
    finally:
        # Only now is the reservation's token dead: readers wait for its page while it is in
        # ``tk``, so no write of this instance may remove it before.
        table.memory.settle(session_id, token, wrote.removed)
    end = token_seq(entry) + count
    if session.message_count != end:
        # A lost response settled from a later copy of the item (other appends on top): the
        # caller reads on from where *this* append ended, or it would skip their messages.
        version = session.version if expected_version is None else expected_version + 1
        session = dataclasses.replace(session, message_count=end, version=version)
    return reads.landed(table, session, f"write to session {session_id!r}")


def read(
    table: Table,
    session_id: str,
    owner: str | None,
    after: int | None,
    each_page: PageScope | None = None,
) -> ContextReader:
    """From the start, one Query from the metadata item; from ``after``, a GetItem of the
    metadata item then a Query from the page holding seq ``after + 1``. ``each_page``: see
    ``Table.query``."""
    validate.after(after)
    now_s = table.now_ms() // 1000
    if after is None:
        session, first, items = reads.head(table, session_id, owner, schema.PAGES_END, each_page)
    else:
        session, first = reads.read_item(table, session_id, owner)
        # Pages are keyed by their last seq: the one holding ``after + 1`` is the first at or
        # above ``msg#<after + 1>``.
        start = schema.page_sk(after + 1)
        items = table.query(schema.pk(session_id), start, schema.PAGES_END, each_page=each_page)
    recent = recent_reservations(first, now_s)
    return ContextReader(read_context(session, items, after, now_s, recent), after)


class ContextReader(Iterator[JSON]):
    """The messages of a session's context in order, read lazily (``SessionStore.context``).
    ``position``: the seq of the last message handed out (or the ``after`` it started from),
    to pass as ``after`` to read on from there later."""

    def __init__(self, texts: Iterator[tuple[int, str]], after: int | None) -> None:
        self._texts = texts
        self.position = after

    def __next__(self) -> JSON:
        seq, text = next(self._texts)
        self.position = seq
        return decode(text)


def read_context(
    session: Session,
    page_items: Iterable[dict[str, Any]],
    after: int | None,
    now_s: int,
    recent: list[int],
) -> Iterator[tuple[int, str]]:
    """``(seq, JSON text)`` of every message after ``after`` among the seqs ``session`` (the
    metadata item, read first) had reserved: a snapshot of the appends begun by then.
    ``page_items``: the pages in key order, python-typed; ``recent``: ``recent_reservations``
    of the metadata item. Pages of another incarnation or past their ttl belong to an earlier
    session under the same id, not yet swept: left out."""
    start = -1 if after is None else after
    reserved = session.message_count
    expected = start + 1  # the seq the next page should start at
    for item in page_items:
        if (
            int(item[PageItem.TTL]) <= now_s
            or item.get(PageItem.INCARNATION) != session.incarnation
        ):
            continue
        first = int(item[PageItem.FIRST])
        if first >= reserved:
            return  # reserved after the metadata item was read: not in this snapshot
        if first > expected and any(expected <= r < first for r in recent):
            return  # an append in flight: what follows the hole waits for it
        messages = item[PageItem.MESSAGES]
        for seq, text in enumerate(messages, first):
            if start < seq < reserved:
                yield seq, text
        expected = max(expected, first + len(messages))


def recent_reservations(item: dict[str, Any], now_s: int) -> list[int]:
    """First seqs of the appends that reserved them less than ``IN_FLIGHT_S`` ago, from the
    metadata item (python-typed): their ``tk`` entries (other writes' hold a bare time, below
    ``SEQ_SPAN``)."""
    horizon = now_s - IN_FLIGHT_S
    return [
        token_seq(v)
        for value in item[Meta.TOKENS].values()
        if (v := int(value)) >= SEQ_SPAN and token_time(v) > horizon
    ]


#: A page holding no message, with the widest seq, ttl and incarnation, for an empty session
#: id and an empty request token: a page's size is this plus the id, the token, and per message
#: its text and 1 byte.
_EMPTY_PAGE_SIZE = sizing.item_size(
    page_item("", SEQ_SPAN - 1, [], int("9" * 11), "", "x" * MAX_TOKEN_LENGTH)
)


def page_size(session_id: str, token: str, texts: list[str]) -> int:
    """An upper bound of the size of the page these messages will take (before the seqs are
    known: sized at the widest)."""
    texts_size = sum(map(sizing.text_size, texts)) + len(texts)
    return _EMPTY_PAGE_SIZE + len(session_id) + len(token) + texts_size
