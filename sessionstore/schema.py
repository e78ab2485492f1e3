"""The single-table layout: one partition per session.

================  ==========================  =========  =====================================
item              sk                          mutable    holds
================  ==========================  =========  =====================================
session metadata  ``metadata``                versioned  status, counters, owner, ttl, tokens
context page      ``msg#<last seq>``          never      one append's messages, first seq, ttl
tool-call record  ``tool#<recordedAt>#<id>``  never      name, input, output, duration, ttl
tool-call guard   ``toolid#<id>``             never      the record's sk + payload fingerprint
================  ==========================  =========  =====================================

Sort keys sort ``metadata`` < ``msg#...`` < ``tool#...`` < ``toolid#...``, so
``sk BETWEEN "metadata" AND "tool$"`` reads the metadata, the context and the history in one
Query, each in order, without the guards; ``sk BETWEEN "metadata" AND "msg$"`` reads the
metadata and the context alone. A page is keyed by
its *last* message's seq (fixed width, so key order is message order): the page holding seq ``k``
is the first one whose key is ``>= msg#<k>``, so reading from any position needs no probe.
"""

from __future__ import annotations

import time
from typing import Any

META_SK = "metadata"
TOOL_PREFIX = "tool#"
GUARD_PREFIX = "toolid#"
PAGE_PREFIX = "msg#"
#: Just past every page key ("$" follows "#"): the upper bound of a context Query.
PAGES_END = "msg$"
#: Just past every tool record key and before the guards (``"tool$" < "toolid#"``).
TOOLS_END = "tool$"
SEQ_DIGITS = 12

#: Versioned writes put their request token in slot ``w<new_version % RING_SIZE>``; a retry whose
#: condition fails finds its own token there (in ALL_OLD) if the first attempt had landed.
RING_SIZE = 16


def pk(session_id: str) -> str:
    return f"session#{session_id}"


def meta_key(session_id: str) -> dict[str, Any]:
    return {"pk": {"S": pk(session_id)}, "sk": {"S": META_SK}}


def ring_slot(version: int) -> str:
    return f"w{version % RING_SIZE}"


def page_sk(last_seq: int) -> str:
    return f"{PAGE_PREFIX}{last_seq:0{SEQ_DIGITS}d}"


def tool_sk(recorded_at: str, tool_call_id: str) -> str:
    return f"{TOOL_PREFIX}{recorded_at}#{tool_call_id}"


def guard_sk(tool_call_id: str) -> str:
    return f"{GUARD_PREFIX}{tool_call_id}"


def create_table(client: Any, table_name: str, *, wait: bool = True, timeout_s: float = 60) -> bool:
    """Create the table if it is missing (PAY_PER_REQUEST, TTL on ``ttl``). Returns True if it
    created it. Idempotent: an existing table, or one with TTL already on, is left as it is."""
    created = False
    try:
        client.create_table(
            TableName=table_name,
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        created = True
    except client.exceptions.ResourceInUseException:
        pass
    if wait:
        deadline = time.monotonic() + timeout_s
        while client.describe_table(TableName=table_name)["Table"]["TableStatus"] != "ACTIVE":
            if time.monotonic() > deadline:
                raise TimeoutError(f"table {table_name} not ACTIVE after {timeout_s}s")
            time.sleep(0.5)
    ttl = client.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"]
    # Real DynamoDB refuses a second UpdateTimeToLive while one is in progress or done.
    if ttl.get("TimeToLiveStatus") in (None, "DISABLED"):
        client.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"},
        )
    return created
