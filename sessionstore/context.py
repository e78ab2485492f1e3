"""Context accumulation: a session's messages, one immutable page item per append.

An append is two writes (``SessionStore.append_context``):

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

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import codec, schema, sizing
from .attempts import gave_up
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
from .ids import MAX_TOKEN_LENGTH
from .lifecycle import Status
from .wire import Cancelled, ConditionFailed
from .write_tokens import SEQ_SPAN, key, token_seq, token_time

if TYPE_CHECKING:
    from .models import Session

#: A page's attribute names (they count in every page's size).
FIRST = "first"  # the seq of its first message
MESSAGES = "messages"  # the messages' JSON text, in order
TOKEN = "token"  # the append's request token
INCARNATION = "incarnation"  # the session's (``Session.incarnation``): pages of an earlier
# session under the same id are told apart by it, not only by a ttl compared with our clock

#: A hole whose reservation is younger than this (seconds) may still be filled: readers stop
#: before it. A page follows its reservation at once; only botocore's retries delay it, and
#: a reservation whose page never came is skipped after this long.
IN_FLIGHT_S = 120
#: A writer may send its page for at least this long (seconds, by its clock) after reserving.
PAGE_DEADLINE_S = 60
#: The clock skew between a writer and its readers that the window allows for (seconds).
SKEW_S = 30

# Readers must still be waiting when a page lands, and a request botocore sends lands up to its
# connect and read timeouts later (it may be applied however late its answer comes). So the last
# send -- each of botocore's own attempts, checked as it is sent (``wire.send_by``) -- is
# ``IN_FLIGHT_S - SKEW_S - landing`` after the time the reservation states in ``tk``; a writer
# whose client has long timeouts states a later time (``stated_delay``), so readers wait longer
# for its holes instead of its page landing after they stopped waiting. The timeouts bound each
# socket operation, not a whole request: a body trickling out for longer, or a request DynamoDB
# applies after the client gave up, could land later still -- the skew allowance is the margin.


def landing_s(client: Any) -> int:
    """How long after botocore sends a request it may still land: the client's connect and read
    timeouts (seconds, rounded up)."""
    config = client.meta.config
    return math.ceil((config.connect_timeout or 0) + (config.read_timeout or 0))


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
        "pk": {"S": schema.pk(session_id)},
        "sk": {"S": schema.page_sk(first + len(messages) - 1)},
        FIRST: {"N": str(first)},
        MESSAGES: {"L": [{"S": m} for m in messages]},
        "ttl": {"N": str(ttl)},
        TOKEN: {"S": token},
        INCARNATION: {"S": incarnation},
    }


@dataclass(slots=True)
class AppendEdit:
    """The reservation (an ``Edit`` for ``locking.MetadataWrite``): the next ``count`` seqs of
    an active session whose context has room, and the bytes counted. ``messageCount`` only
    grows, so the room condition needs no exact item. The seqs reserved are
    ``[messageCount before, messageCount after)``; the first is kept in the token's entry."""

    session_id: str
    count: int
    added: int
    max_messages: int
    max_bytes: int
    delay_s: int = 0  # ``stated_delay``: how much later than now the entry states

    def clauses(self, e: Expr) -> tuple[str, str, str]:
        count, size = e.n("messageCount"), e.n("contextBytes")
        sets = f"{count} = {count} + {e.v(self.count)}, {size} = {size} + {e.v(self.added)}"
        condition = (
            f"{e.n('status')} = {e.v(Status.ACTIVE.value)}"
            f" AND {count} <= {e.v(self.max_messages - self.count)}"
            f" AND {size} <= {e.v(self.max_bytes - self.added)}"
        )
        return sets, "", condition

    def token_value(self, e: Expr, now_s: int) -> str:
        # The count before this write is the first seq it reserves (SET reads the old item).
        return f"{e.n('messageCount')} + {e.v((now_s + self.delay_s) * SEQ_SPAN)}"

    def judge(self, current: Session) -> Session | None:
        if current.status is not Status.ACTIVE:
            raise SessionNotActive(self.session_id, current.status)
        if (
            current.message_count + self.count > self.max_messages
            or current.context_bytes + self.added > self.max_bytes
        ):
            raise ContextFull(
                self.session_id,
                current.message_count,
                current.context_bytes,
                self.count,
                self.added,
                self.max_messages,
                self.max_bytes,
            )
        return None


def first_seq(session: Session, token: str) -> int:
    """The first seq the landed reservation named ``token`` got; ``session`` is the item it
    left (or a later copy: the entry stays until the write has ended)."""
    return token_seq(session.write_tokens[key(token)])


@dataclass(slots=True)
class WritePage:
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

    operation = "put_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        if now_ms > self.deadline_ms:
            raise Unavailable(
                f"context page of session {self.session_id!r}: not sent, its send-by time "
                "had passed and readers may have stopped waiting for it; the messages were not "
                "stored by this attempt",
                maybe_applied=False,
            )
        e = Expr()
        condition = (
            f"attribute_not_exists({e.n('pk')}) OR {e.n('ttl')} <= {e.v(now_ms // 1000)}"
            f" OR {e.n(INCARNATION)} <> {e.v(self.item[INCARNATION]['S'])}"
        )
        return {
            "TableName": self.table,
            "Item": self.item,
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            **e.params(),
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
    ``position``: the seq of the last message handed out (or the ``after`` it started from),
    to pass as ``after`` to read on from there later."""

    def __init__(self, texts: Iterator[tuple[int, str]], after: int | None) -> None:
        self._texts = texts
        self.position = after

    def __next__(self) -> JSON:
        seq, text = next(self._texts)
        self.position = seq
        return decode(text)


def validate_after(after: object) -> None:
    if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
        raise InvalidInput("after must be None or a seq (an int >= 0)")


def first_page_key(after: int | None) -> str | None:
    """Where a page Query starts for messages after ``after``: the key of the page that holds
    seq ``after + 1`` is the first one at or above ``msg#<after + 1>`` (pages are keyed by their
    last seq). None: start with the first page."""
    return None if after is None else schema.page_sk(after + 1)


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
        if int(item["ttl"]) <= now_s or item.get(INCARNATION) != session.incarnation:
            continue
        first = int(item[FIRST])
        if first >= reserved:
            return  # reserved after the metadata item was read: not in this snapshot
        if first > expected and any(expected <= r < first for r in recent):
            return  # an append in flight: what follows the hole waits for it
        messages = item[MESSAGES]
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
        for value in item["tk"].values()
        if (v := int(value)) >= SEQ_SPAN and token_time(v) > horizon
    ]


def message_texts(messages: object) -> list[str]:
    """Each message's exact JSON text, validated."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise InvalidInput("messages must be a list of JSON values")
    if not messages:
        raise InvalidInput("messages must not be empty")
    return [codec.encode(m, f"messages[{i}]") for i, m in enumerate(messages)]


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
