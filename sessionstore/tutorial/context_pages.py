"""Exercises of notebook 03 (context pages): the reservation, and the page written once.

``RESERVE``: the UpdateItem parameters that reserve ``n`` seqs on a session item, only while it
is ``active`` and its context has room, and return the first seq. The checker races appends from
several threads and reports seqs lost or handed out twice, a session not ``active`` that took
messages, or a limit passed.

``PAGE_ONCE``: the PutItem condition of a page: written only if no live page holds its key.

Each checker creates a table of its own on the notebook's engine (``schema.create_table``) and
deletes it when done; the answers are sent with the low-level client, as the notebook does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .. import schema
from .checking import Exercise, NotYet, call, landed, own_table, quote

__all__ = [
    "EACH",
    "JOIN_S",
    "NOW_S",
    "PAGE_ONCE",
    "RESERVE",
    "SIZES",
    "THREADS",
    "Params",
    "check_page_once",
    "check_reserve",
    "page_once",
    "page_once_solution",
    "reserve",
    "reserve_solution",
]

Params = dict[str, Any]  # a request's parameters, as the low-level client takes them

#: What the checker sends itself: the table, and the key (an UpdateItem) or the item (a PutItem).
_KEYED, _PUT = frozenset({"TableName", "Key"}), frozenset({"TableName", "Item"})
THREADS, EACH = 8, 5
JOIN_S = 120  # how long the race may take, at most
#: What the race's appends reserve: 1 to 3 seqs each.
SIZES = (1, 2, 3)
NOW_S = 1_767_268_800  # 2026-01-01T12:00:00Z, the notebooks' clock


# ---------------------------------------------------------------------------- 1 · the reservation


def reserve(n: int, limit: int) -> dict[str, object]:
    """UpdateItem parameters (all but TableName and Key) that reserve the next n
    seqs of a session item -- only while its status is 'active' and messageCount
    stays <= limit -- with the first seq reserved in the response's Attributes,
    as messageCount."""
    return {
        "UpdateExpression": "SET messageCount = messageCount + :n",
        "ExpressionAttributeValues": {":n": {"N": str(n)}},
        "ReturnValues": "UPDATED_NEW",
    }


def reserve_solution(n: int, limit: int) -> dict[str, object]:
    return {
        "UpdateExpression": "SET messageCount = messageCount + :n",
        # A condition cannot add: the room left for n more is computed here.
        "ConditionExpression": "#status = :active AND messageCount <= :room",
        "ExpressionAttributeNames": {"#status": "status"},  # a reserved word
        "ExpressionAttributeValues": {
            ":n": {"N": str(n)},
            ":active": {"S": "active"},
            ":room": {"N": str(limit - n)},
        },
        "ReturnValues": "UPDATED_OLD",  # messageCount before the write: the first seq
    }


@contextmanager
def _table(client: Any, what: str) -> Iterator[_Table]:
    with own_table(client, f"exercise-03-{what}-{os.getpid()}") as name:
        yield _Table(client, name)


@dataclass(frozen=True)
class _Table:
    """A table of the checker's own, with one session item per case."""

    client: Any
    name: str

    def session(self, sid: str, status: str, count: int) -> dict[str, Any]:
        key = schema.meta_key(sid)
        item = {**key, "status": {"S": status}, "messageCount": {"N": str(count)}}
        self.client.put_item(TableName=self.name, Item=item)
        return key

    def count(self, key: Mapping[str, Any]) -> int:
        item = self.client.get_item(TableName=self.name, Key=key, ConsistentRead=True)["Item"]
        return int(item["messageCount"]["N"])


def _params(answer: Callable[..., Any], *args: Any, sent: frozenset[str] = _KEYED) -> Params:
    """The answer's parameters, without the ones the checker sends (``sent``)."""
    params = call(answer, *args)
    if not isinstance(params, dict):
        raise NotYet(f"return the request's parameters as a dict, not {type(params).__name__}")
    extra = sent & set(params)
    if extra:
        raise NotYet(f"leave out {sorted(extra)}: the checker sends them (its own table)")
    condition = str(params.get("ConditionExpression", ""))
    if "+" in condition or "-" in condition:
        raise NotYet(
            "a ConditionExpression cannot add or subtract (DynamoDB refuses it): compute the "
            "room left in Python, limit - n, and compare messageCount <= :room"
        )
    return params


def _send(table: _Table, key: Mapping[str, Any], params: Params) -> dict[str, Any] | None:
    """The response's Attributes, or None if the condition refused the write."""
    response: dict[str, Any] = {}

    def update() -> None:
        response.update(table.client.update_item(TableName=table.name, Key=key, **params))

    return response.get("Attributes") or {} if landed(update, "the UpdateItem") else None


def _first(attributes: Mapping[str, Any], what: str) -> int:
    if "messageCount" not in attributes:
        raise NotYet(
            f"{what}: the response holds no messageCount (ReturnValues {sorted(attributes)}): "
            "ask for it with ReturnValues"
        )
    return int(attributes["messageCount"]["N"])


def check_reserve(answer: Callable[..., Any], client: Any) -> str:
    with _table(client, "reserve") as table:
        # One append after another: the first seqs are 0, then 2.
        key = table.session("one-by-one", "active", 0)
        for n, want in ((2, 0), (3, 2)):
            attributes = _send(table, key, _params(answer, n, 100))
            if attributes is None:
                raise NotYet(f"an append of {n} to an active session at {want} of 100 was refused")
            got = _first(attributes, f"an append of {n} at {want}")
            if table.count(key) != want + n:
                raise NotYet(
                    f"an append of {n} to a session at {want} left messageCount at "
                    f"{table.count(key)}, not {want + n}: add n to it in the update"
                )
            if got != want:
                raise NotYet(
                    f"an append of {n} to a session at {want} returned {got} as its first seq: "
                    "that is messageCount after the write; the first seq reserved is the count "
                    "before it (ReturnValues='UPDATED_OLD')"
                )
        # The race: every append's seqs [first, first + n), none twice, none missing.
        key = table.session("race", "active", 0)
        got_seqs: list[tuple[int, int]] = []
        failures: list[str] = []
        lock = threading.Lock()

        def appender(w: int) -> None:
            for j in range(EACH):
                n = SIZES[(w + j) % len(SIZES)]
                try:
                    attributes = _send(table, key, _params(answer, n, 10_000))
                    first = None if attributes is None else _first(attributes, "a raced append")
                except Exception as exc:  # nothing leaves a thread as a traceback
                    with lock:
                        failures.append(str(exc) if isinstance(exc, NotYet) else quote(exc))
                    return
                with lock:
                    if first is None:
                        failures.append("an append to an active session with room was refused")
                    else:
                        got_seqs.append((first, n))

        pool = [threading.Thread(target=appender, args=(w,)) for w in range(THREADS)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join(timeout=JOIN_S)
        if any(thread.is_alive() for thread in pool):
            raise NotYet(f"racing appends from {THREADS} threads did not end in {JOIN_S} s")
        if failures:
            raise NotYet(f"racing appends from {THREADS} threads: {failures[0]}")
        handed = sorted(seq for first, n in got_seqs for seq in range(first, first + n))
        total = table.count(key)
        if len(handed) != len(set(handed)):
            raise NotYet(f"{THREADS} racing threads: some seqs went to two appends")
        if handed != list(range(total)):
            raise NotYet(
                f"{THREADS} racing threads: the seqs handed out do not tile 0..messageCount - 1 "
                "(some lost, or past the count)"
            )
        # Only an active session takes messages.
        for status in ("initializing", "closing", "closed"):
            key = table.session(status, status, 5)
            taken = _send(table, key, _params(answer, 2, 100))
            if taken is not None or table.count(key) != 5:
                raise NotYet(
                    f"a session in status {status!r} took 2 messages (messageCount 5 -> "
                    f"{table.count(key)}): only an 'active' one may -- add a condition on "
                    "status (a reserved word: name it through ExpressionAttributeNames)"
                )
        # The limit: filling the context exactly is allowed, passing it is not.
        key = table.session("eight-of-ten", "active", 8)
        if _send(table, key, _params(answer, 2, 10)) is None:
            raise NotYet(
                "an append of 2 to a session at 8 of 10 was refused: the context may fill up "
                "to its limit exactly"
            )
        for count, n in ((10, 1), (9, 3)):
            key = table.session(f"{count}-of-ten", "active", count)
            if _send(table, key, _params(answer, n, 10)) is not None:
                raise NotYet(
                    f"an append of {n} to a session at {count} of 10 went in: messageCount "
                    f"{table.count(key)} passes the limit -- the condition must hold for the "
                    "count after the append: messageCount <= limit - n"
                )
    return (
        f"{THREADS * EACH} appends from {THREADS} threads got disjoint seqs, none lost; the "
        "first seq came back as messageCount before the write; sessions initializing, closing "
        "and closed took nothing; the context filled to its limit and no further"
    )


RESERVE = Exercise("reserve", reserve, reserve_solution, check_reserve)


# ---------------------------------------------------------------------------- 2 · the page, once


def page_once(now_s: int) -> dict[str, object]:
    """PutItem parameters (all but TableName and Item) that write a context page
    only if no live page holds its key: the key is free, or the page there has
    expired (its ttl, epoch seconds, is not after now_s -- TTL deletes expired
    items late)."""
    return {}


def page_once_solution(now_s: int) -> dict[str, object]:
    return {
        "ConditionExpression": "attribute_not_exists(pk) OR #ttl <= :now",
        "ExpressionAttributeNames": {"#ttl": "ttl"},  # a reserved word
        "ExpressionAttributeValues": {":now": {"N": str(now_s)}},
    }


def _page(key: Mapping[str, Any], token: str, ttl: int) -> dict[str, Any]:
    messages = {"L": [{"S": f'"by {token}"'}]}
    return {**key, "messages": messages, "token": {"S": token}, "ttl": {"N": str(ttl)}}


def check_page_once(answer: Callable[..., Any], client: Any) -> str:
    with _table(client, "page") as table:

        def put(key: Mapping[str, Any], token: str) -> bool:
            params = _params(answer, NOW_S, sent=_PUT)
            item = _page(key, token, NOW_S + 3600)
            return landed(
                lambda: table.client.put_item(TableName=table.name, Item=item, **params),
                "the PutItem",
            )

        def token(key: Mapping[str, Any]) -> str:
            item = client.get_item(TableName=table.name, Key=key, ConsistentRead=True)
            return str(item.get("Item", {}).get("token", {}).get("S", ""))

        def at(seq: int) -> dict[str, Any]:
            return {"pk": {"S": schema.pk("s")}, "sk": {"S": schema.page_sk(seq)}}

        if not put(at(0), "a") or token(at(0)) != "a":
            raise NotYet("a page was refused on a free key")
        if put(at(0), "b") or token(at(0)) != "a":
            raise NotYet(
                f"a second page replaced the live page under {schema.page_sk(0)} (its writer "
                f"went from 'a' to {token(at(0))!r}): its messages are lost -- write only if "
                "attribute_not_exists(pk)"
            )
        for ttl in (NOW_S - 60, NOW_S):
            client.put_item(TableName=table.name, Item=_page(at(1), "old", ttl))
            if not put(at(1), "new") or token(at(1)) != "new":
                raise NotYet(
                    f"a page whose ttl ({ttl}) is not after now ({NOW_S}) was not replaced: it "
                    "belongs to an expired session that TTL has not deleted yet -- allow "
                    "#ttl <= :now too (ttl is a reserved word)"
                )
    return (
        "a page went onto a free key and onto an expired page's, and a second page under a "
        "live one's key was refused, leaving the first intact"
    )


PAGE_ONCE = Exercise("page_once", page_once, page_once_solution, check_page_once)
