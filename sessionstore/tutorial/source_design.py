"""THE SOURCE DESIGN, TRANSLITERATED -- WRONG ON PURPOSE. Not the package's behaviour.

A faithful Python port of the TypeScript snippets the project starts from
(``shared/seeds/000_*.txt``), kept so that tests, notebooks and benchmarks can show each of its
defects next to the fix. Every function here has a known bug; see DESIGN.md, "Known defects".
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

__all__ = [
    "TABLE",
    "append_context_messages",
    "begin_session_close",
    "record_tool_call",
    "update_session_status",
]

TABLE = "mcp-sessions"
_ser = TypeSerializer()
_deser = TypeDeserializer()


def _now_iso() -> str:
    # new Date().toISOString()
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _values(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _ser.serialize(v) for k, v in values.items()}


def update_session_status(
    client: Any,
    session_id: str,
    new_status: str,
    max_retries: int = 3,
    *,
    table: str = TABLE,
    sleep: Callable[[float], None] = time.sleep,
    now_iso: Callable[[], str] = _now_iso,
) -> None:
    """Read (ConsistentRead GetItem), then conditional UpdateItem; re-read on every conflict,
    backoff ``50 * 2**attempt + random() * 20`` ms. Two requests per attempt."""
    key = {"pk": {"S": f"session#{session_id}"}, "sk": {"S": "metadata"}}
    for attempt in range(max_retries + 1):
        result = client.get_item(TableName=table, Key=key, ConsistentRead=True)
        if "Item" not in result:
            raise RuntimeError(f"Session {session_id} not found")
        expected_version = _deser.deserialize(result["Item"]["version"])
        try:
            client.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET #status = :status, updatedAt = :now, #v = #v + :inc",
                ConditionExpression="#v = :expected",
                ExpressionAttributeNames={"#status": "status", "#v": "version"},
                ExpressionAttributeValues=_values(
                    {
                        ":status": new_status,
                        ":now": now_iso(),
                        ":inc": 1,
                        ":expected": expected_version,
                    }
                ),
            )
            return
        except ClientError as err:
            if (
                err.response["Error"]["Code"] == "ConditionalCheckFailedException"
                and attempt < max_retries
            ):
                sleep((50 * 2**attempt + random.random() * 20) / 1000)
                continue
            raise
    raise RuntimeError(f"Could not update session {session_id} after {max_retries} retries")


def append_context_messages(
    client: Any,
    session_id: str,
    new_messages: list[Any],
    expected_version: int,
    *,
    table: str = TABLE,
    now_iso: Callable[[], str] = _now_iso,
) -> None:
    """BUG: no ``attribute_exists(pk)`` -- on a missing session UpdateItem upserts a ghost item
    (or fails with ValidationException on ``#v + :inc``), and a lost response retried by the
    caller appends twice."""
    client.update_item(
        TableName=table,
        Key={"pk": {"S": f"session#{session_id}"}, "sk": {"S": "metadata"}},
        UpdateExpression=(
            "SET context = list_append(if_not_exists(context, :empty), :msgs), "
            "updatedAt = :now, #v = #v + :inc"
        ),
        ConditionExpression="#v = :expected",
        ExpressionAttributeNames={"#v": "version"},
        ExpressionAttributeValues=_values(
            {
                ":msgs": new_messages,
                ":empty": [],
                ":now": now_iso(),
                ":inc": 1,
                ":expected": expected_version,
            }
        ),
    )


def record_tool_call(
    client: Any,
    session_id: str,
    tool_call_id: str,
    tool_name: str,
    input: Any,
    output: Any,
    duration_ms: int,
    *,
    table: str = TABLE,
    now_iso: Callable[[], str] = _now_iso,
    now_s: Callable[[], float] = time.time,
) -> None:
    """BUG: a fresh timestamp in the sort key means ``attribute_not_exists(pk)`` never fires
    on a retry (two records for one call), and nothing checks the session's status."""
    iso = now_iso()
    ttl_sec = int(now_s()) + 86400
    item = {
        "pk": f"session#{session_id}",
        "sk": f"tool#{iso}#{tool_call_id}",
        "toolCallId": tool_call_id,
        "toolName": tool_name,
        "input": input,
        "output": output,
        "durationMs": duration_ms,
        "recordedAt": iso,
        "ttl": ttl_sec,
    }
    try:
        client.put_item(
            TableName=table,
            Item=_values(item),
            ConditionExpression="attribute_not_exists(pk)",
        )
    except ClientError as err:
        # "Idempotent: if this toolCallId was already recorded, skip silently"
        if err.response["Error"]["Code"] != "ConditionalCheckFailedException":
            raise


def begin_session_close(
    client: Any, session_id: str, *, table: str = TABLE, now_iso: Callable[[], str] = _now_iso
) -> None:
    """BUG: swallows every ConditionalCheckFailed -- "no such session" included."""
    try:
        client.update_item(
            TableName=table,
            Key={"pk": {"S": f"session#{session_id}"}, "sk": {"S": "metadata"}},
            UpdateExpression="SET #status = :closing, updatedAt = :now, #v = #v + :inc",
            ConditionExpression="#status = :active AND attribute_exists(pk)",
            ExpressionAttributeNames={"#status": "status", "#v": "version"},
            ExpressionAttributeValues=_values(
                {":closing": "closing", ":active": "active", ":now": now_iso(), ":inc": 1}
            ),
        )
    except ClientError as err:
        if err.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return  # "already closing or closed -- idempotent, not an error"
        raise
