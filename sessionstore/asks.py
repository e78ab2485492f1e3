"""Questions to the client, answered once, through the table.

Layer: a pattern module, over ``table``; the MCP layer's ``back_channel`` builds on it.

Why: in a handshake-era MCP session a tool may ask the client something in the middle of a call
(sampling, elicitation). The question goes out on the call's own response stream, but the
client's answer is a new POST, and behind a load balancer that lands on any instance. So the
question is an item in its session's partition, ``ask#<id>`` (``AskItem``); whichever instance
receives the answer writes it into that item, once; the instance that asked polls for it.

* ``ask``: one PutItem if the id is free (1 WCU). The id starts with the time, so asks sort in
  the order they were made.
* ``answer``: one UpdateItem on ``the ask exists, was not answered and its time is not up`` --
  the first answer is taken; a refusal's ALL_OLD tells a repeat (the client re-sending its POST)
  from an answer to nothing (1 WCU per KB of the item).
* ``poll``: one strongly consistent Query from the ask to the metadata item (``ask#`` sorts just
  before ``metadata``, and nothing else does): the answer if it is in, and the session checked
  live and active in the same read. The range holds this ask, the asks made after it that are
  still open, and the metadata item -- 1 RCU while they are under 4 KB together.
* ``settle``: one UpdateItem that removes the answer once the asker has read it, so no answer
  sits in a later ask's range (TTL deletes the ask itself, but late).

Nothing else reads the ``ask#`` range.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar

from . import schema
from .clock import format_timestamp
from .conditions import (
    Condition,
    Field,
    Name,
    Value,
    absent,
    assign,
    clause,
    exists,
    item_to_wire,
    put_item,
    remove,
    update_item,
)
from .errors import DynamoDBError, ItemTooLarge, SessionNotActive
from .ids import validate_id
from .item import live
from .models import Status
from .table import Plan, Table
from .wire import Cancelled, ConditionFailed

#: The sort key prefix of an ask (``schema``): just before the metadata item, in no other range.
ASK_PREFIX = schema.ASK_PREFIX
#: The most bytes of an answer kept (JSON text): an item holds 400 KB, with room for the rest.
ANSWER_MAX_BYTES = 350_000


class AskItem(Field):
    """An ask item's attributes."""

    PK = "pk"
    SK = "sk"  # ``ask#<id>``
    METHOD = "method"  # what was asked: ``sampling/createMessage``, ``elicitation/create``
    ASKED_AT = "askedAt"
    DEADLINE = "deadline"  # epoch ms: no answer is taken after it
    TTL = "ttl"  # epoch seconds: the deadline, rounded up
    ANSWER = "answer"  # JSON text: the client's ``{"result": ...}`` or ``{"error": ...}``
    ANSWERED_AT = "answeredAt"  # set with the answer, kept once it is removed (``settle``)


class Delivery(Enum):
    """What became of an answer."""

    TAKEN = "taken"  # written: the asking call will read it
    REPEATED = "repeated"  # the ask had its answer already: this one is dropped
    UNKNOWN = "unknown"  # no such ask, or its time is up


def ask_key(session_id: str, ask_id: str) -> dict[str, Any]:
    return {AskItem.PK: {"S": schema.pk(session_id)}, AskItem.SK: {"S": schema.ask_sk(ask_id)}}


def open_until(now_ms: int) -> Condition:
    """The ask still takes an answer: it exists, was not answered, and its deadline is ahead."""
    unanswered = absent(AskItem.ANSWERED_AT)
    ahead = clause("open_until", "{} > {}", Name(AskItem.DEADLINE), Value(now_ms))
    return exists() & unanswered & ahead


@dataclass(frozen=True, slots=True)
class PutAsk(Plan[None]):
    table: str
    session_id: str
    ask_id: str
    method: str
    deadline_ms: int

    operation: ClassVar[str] = "put_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        key = ask_key(self.session_id, self.ask_id)
        item: dict[str, Any] = {
            AskItem.PK: key[AskItem.PK]["S"],
            AskItem.SK: key[AskItem.SK]["S"],
            AskItem.METHOD: self.method,
            AskItem.ASKED_AT: format_timestamp(now_ms),
            AskItem.DEADLINE: self.deadline_ms,
            AskItem.TTL: -(-self.deadline_ms // 1000),
        }
        return put_item(self.table, item_to_wire(item), absent())

    def succeeded(self, response: dict[str, Any], now_ms: int) -> None:
        return None

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> None:
        # The id is fresh: the item there is this ask's own attempt, landed before a lost
        # response, unless the id factory repeats itself.
        assert isinstance(failure, ConditionFailed)
        if failure.old is not None and failure.old.get(AskItem.METHOD) == self.method:
            return None
        raise DynamoDBError("ConditionalCheckFailedException", f"ask id {self.ask_id!r} in use")


@dataclass(frozen=True, slots=True)
class PutAnswer(Plan[Delivery]):
    table: str
    session_id: str
    ask_id: str
    answer: str

    operation: ClassVar[str] = "update_item"

    def request(self, now_ms: int) -> dict[str, Any]:
        update = assign(AskItem.ANSWER, self.answer) + assign(
            AskItem.ANSWERED_AT, format_timestamp(now_ms)
        )
        key = ask_key(self.session_id, self.ask_id)
        return update_item(self.table, key, update, open_until(now_ms), returns=None)

    def succeeded(self, response: dict[str, Any], now_ms: int) -> Delivery:
        return Delivery.TAKEN

    def refused(self, failure: ConditionFailed | Cancelled, now_ms: int) -> Delivery:
        assert isinstance(failure, ConditionFailed)
        old = failure.old
        if old is None or AskItem.ANSWERED_AT not in old:
            return Delivery.UNKNOWN  # never asked, deleted, or past its deadline unanswered
        # Ours, landed before a lost response, or an earlier copy of the same POST: taken.
        return Delivery.TAKEN if old.get(AskItem.ANSWER) == self.answer else Delivery.REPEATED


def ask(table: Table, session_id: str, token: str, method: str, wait_ms: int) -> tuple[str, int]:
    """Open an ask that takes an answer for ``wait_ms``: one PutItem. Returns its id (the
    time, then ``token``, unique per instance) and its deadline (epoch ms)."""
    now_ms = table.now_ms()
    ask_id = validate_id(f"{now_ms:013d}-{token}", "ask_id")
    deadline_ms = now_ms + wait_ms
    table.drive(PutAsk(table.name, session_id, ask_id, method, deadline_ms), "ask")
    return ask_id, deadline_ms


def settle(table: Table, session_id: str, ask_id: str) -> None:
    """Remove the answer the asker has read (the ask stays answered): one UpdateItem."""
    key = ask_key(session_id, validate_id(ask_id, "ask_id"))
    request = update_item(table.name, key, remove(Name(AskItem.ANSWER)), exists(), returns=None)
    with suppress(ConditionFailed):  # gone already (TTL): nothing to remove
        table.send("update_item", request)


def answer(table: Table, session_id: str, ask_id: str, answer_text: str) -> Delivery:
    """Give the ask its answer (JSON text) if it has none yet: one UpdateItem.
    ``ItemTooLarge`` (nothing written) past ``ANSWER_MAX_BYTES``."""
    validate_id(ask_id, "ask_id")
    size = len(answer_text.encode())
    if size > ANSWER_MAX_BYTES:
        raise ItemTooLarge(0, size, ANSWER_MAX_BYTES, what="the client's answer")
    plan = PutAnswer(table.name, session_id, ask_id, answer_text)
    return table.drive(plan, f"answer to ask {ask_id!r}")


def poll(table: Table, session_id: str, ask_id: str, owner: str | None) -> str | None:
    """The ask's answer (JSON text), or None while there is none: one strongly consistent
    Query. Raises what ``item.live`` raises when the session is gone, expired or another's,
    and ``SessionNotActive`` once it is closing or closed: nobody is left to wait for."""
    sk = schema.ask_sk(ask_id)
    found: str | None = None
    meta: dict[str, Any] | None = None
    for item in table.query(schema.pk(session_id), sk, schema.META_SK):
        if item[AskItem.SK] == sk:
            found = item.get(AskItem.ANSWER)
        elif item[AskItem.SK] == schema.META_SK:
            meta = item
    session = live(session_id, meta, owner, table.now_ms() // 1000)
    if found is None and session.status is not Status.ACTIVE:
        raise SessionNotActive(session_id, session.status)
    return found


__all__ = ["AskItem", "Delivery", "answer", "ask", "poll", "settle"]
