"""The single-table layout: one partition per session.

================  ==========================  =========  =====================================
item              sk                          mutable    holds
================  ==========================  =========  =====================================
ask               ``ask#<time>-<token>``      once       a tool's request to the client and its
                                                         answer (``asks``), ttl
session metadata  ``metadata``                versioned  status, counters, owner, ttl, tokens
attributes        ``metadata#attributes``     versioned  the session's attributes (``attributes``)
context page      ``msg#<last seq>``          never      one append's messages, first seq, ttl
tool call         ``tool#<id>``               once       claimed -> recorded: name, fingerprint,
                                                         input, output, duration, ttl
================  ==========================  =========  =====================================

Sort keys sort ``ask#...`` < ``metadata`` < ``metadata#attributes`` < ``msg#...`` < ``tool#...``,
so an ask is read with the metadata item alone (``asks.poll``), and
``sk BETWEEN "metadata" AND "tool$"`` reads the session, the context and the tool calls in one
Query; ``sk BETWEEN "metadata" AND "msg$"`` reads the session and the context alone. A tool call is
keyed by its id (the idempotency key); the history is sorted by recording time after the read
(``sessionstore.tool_calls.history``). A page is keyed by
its *last* message's seq (fixed width, so key order is message order): the page holding seq ``k``
is the first one whose key is ``>= msg#<k>``, so reading from any position needs no probe.
The metadata item's fields are in ``sessionstore.item``.
"""

from __future__ import annotations

import re
import time
from typing import Any

from botocore.exceptions import ClientError

from .wire import engine_lacks

__all__ = [
    "ASK_PREFIX",
    "ATTRS_SK",
    "META_SK",
    "PAGES_END",
    "PAGE_PREFIX",
    "TABLE_DEFINITION",
    "TOOLS_END",
    "TOOL_PREFIX",
    "TTL_ATTRIBUTE",
    "ask_sk",
    "attrs_key",
    "create_table",
    "meta_key",
    "page_sk",
    "pk",
    "tool_sk",
]

#: Just before ``META_SK``: a Query from an ask to the metadata item reads the two alone.
ASK_PREFIX = "ask#"
META_SK = "metadata"
#: Beside the metadata item, not in it: every tool call and append writes the metadata item and
#: is billed by its whole size, which attributes of up to 4 KiB would multiply.
ATTRS_SK = "metadata#attributes"
TOOL_PREFIX = "tool#"
PAGE_PREFIX = "msg#"
#: Just past every page key ("$" follows "#"): the upper bound of a context Query.
PAGES_END = "msg$"
#: Just past every tool-call key.
TOOLS_END = "tool$"
SEQ_DIGITS = 12


def pk(session_id: str) -> str:
    return f"session#{session_id}"


def meta_key(session_id: str) -> dict[str, Any]:
    return {"pk": {"S": pk(session_id)}, "sk": {"S": META_SK}}


def attrs_key(session_id: str) -> dict[str, Any]:
    return {"pk": {"S": pk(session_id)}, "sk": {"S": ATTRS_SK}}


def page_sk(last_seq: int) -> str:
    return f"{PAGE_PREFIX}{last_seq:0{SEQ_DIGITS}d}"


def tool_sk(tool_call_id: str) -> str:
    return f"{TOOL_PREFIX}{tool_call_id}"


def ask_sk(ask_id: str) -> str:
    return f"{ASK_PREFIX}{ask_id}"


#: The attribute DynamoDB's TTL deletes expired items by.
TTL_ATTRIBUTE = "ttl"
_POLL_S = 0.5
#: What an UpdateTimeToLive refused because another caller's came first says: "TimeToLive is
#: already enabled", or "...modified multiple times..." while that change is in progress.
_TTL_RACE = re.compile(r"already enabled|modified|in progress", re.IGNORECASE)


#: The table's keys and billing: what ``CreateTable`` is sent besides the name.
TABLE_DEFINITION: dict[str, Any] = {
    "AttributeDefinitions": [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
    ],
    "KeySchema": [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ],
    "BillingMode": "PAY_PER_REQUEST",
}


def create_table(client: Any, table_name: str, *, wait: bool = True, timeout_s: float = 60) -> bool:
    """Create the table if it is missing (PAY_PER_REQUEST, TTL on ``ttl``). Returns True if it
    created it. Idempotent: an existing table, or one with TTL already on, is left as it is.

    Several instances may start at once on a new table: one creates it and returns True, the
    others get ``ResourceInUseException`` and return False; with ``wait`` each waits (up to
    ``timeout_s``) until the table is ACTIVE. TTL is then requested unless it is ENABLING or
    ENABLED; a ``ValidationException`` saying another caller's request came first is success
    once ``DescribeTimeToLive`` shows TTL ENABLING or ENABLED on ``ttl`` (re-read until
    ``timeout_s``), and is raised otherwise, like any other error. An engine lacking one of
    these operations (``UnknownOperationException``) is a ``DynamoDBError`` naming it."""
    deadline = time.monotonic() + timeout_s
    try:
        try:
            client.create_table(TableName=table_name, **TABLE_DEFINITION)
            created = True
        except client.exceptions.ResourceInUseException:
            created = False  # another caller's, possibly still CREATING
        if wait:
            while _table_status(client, table_name) != "ACTIVE":
                if time.monotonic() > deadline:
                    raise TimeoutError(f"table {table_name} not ACTIVE after {timeout_s}s")
                time.sleep(_POLL_S)
        if _ttl(client, table_name).get("TimeToLiveStatus") in (None, "DISABLED"):
            try:
                client.update_time_to_live(
                    TableName=table_name,
                    TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
                )
            except ClientError as exc:
                error = exc.response.get("Error", {})
                race = _TTL_RACE.search(error.get("Message", ""))
                if error.get("Code") != "ValidationException" or race is None:
                    raise
                _confirm_ttl_enabled(client, table_name, deadline, exc)
        return created
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "UnknownOperationException":
            raise
        raise engine_lacks(client, exc, f"create_table needs (table {table_name!r})") from exc


def _table_status(client: Any, table_name: str) -> str | None:
    try:
        status: str = client.describe_table(TableName=table_name)["Table"]["TableStatus"]
    except client.exceptions.ResourceNotFoundException:
        # DescribeTable is eventually consistent: just after CreateTable it may not see the table.
        return None
    return status


def _ttl(client: Any, table_name: str) -> dict[str, Any]:
    response = client.describe_time_to_live(TableName=table_name)
    return dict(response["TimeToLiveDescription"])


def _confirm_ttl_enabled(
    client: Any, table_name: str, deadline: float, refusal: ClientError
) -> None:
    # The message alone does not say who changed TTL last (a refusal also follows a recent
    # *disable*), so the table's own TTL status decides; DISABLED may be a stale read of the
    # winner's change, so it is read again until the deadline.
    while True:
        ttl = _ttl(client, table_name)
        status = ttl.get("TimeToLiveStatus")
        if status in ("ENABLING", "ENABLED"):
            if ttl.get("AttributeName", TTL_ATTRIBUTE) == TTL_ATTRIBUTE:
                return
            raise refusal
        if status == "DISABLING" or time.monotonic() > deadline:
            raise refusal
        time.sleep(_POLL_S)
