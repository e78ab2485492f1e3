"""Notebook 02's exercise: make a read-modify-write safe with the version condition.

``add_message`` writes back the context list its writer read plus one message, the way two
servers would in the source design's layout (the context as a list inside the metadata item).
Without a condition the second of two interleaved writers silently drops the first one's message;
the learner adds the clause that refuses a stale writer. ``check_add_message`` runs two writers on
the embedded engine in the unlucky order (both read, Alice writes, Bob writes) and says whether
Bob's write lost Alice's message, or whether a writer whose read was current was refused.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from .. import schema
from . import Exercise, NotYet

#: The checker's own table and item (recreated item by item: every run starts the same).
TABLE = "nb02-exercise-locking"
KEY = {"pk": {"S": "session#exercise"}, "sk": {"S": "metadata"}}
START_VERSION = 2


def add_message(
    client: Any, table: str, key: dict[str, Any], seen: dict[str, Any], message: str
) -> None:
    """Write back the context list this writer read (``seen``: the item as it read it, in
    DynamoDB's wire form) plus ``message``, and move the version up by one in the same request.
    TODO: refuse the write if another writer wrote the item since ``seen`` was read."""
    client.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET #context = :context, #version = #version + :one",
        ExpressionAttributeNames={"#context": "context", "#version": "version"},
        ExpressionAttributeValues={
            ":context": {"L": [*seen["context"]["L"], {"S": message}]},
            ":one": {"N": "1"},
        },
    )


def add_message_solution(
    client: Any, table: str, key: dict[str, Any], seen: dict[str, Any], message: str
) -> None:
    """Write back the context list this writer read plus ``message``, and move the version up
    by one -- only if the version is still the one this writer read (``version = :seen``)."""
    client.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET #context = :context, #version = #version + :one",
        ConditionExpression="#version = :seen",
        ExpressionAttributeNames={"#context": "context", "#version": "version"},
        ExpressionAttributeValues={
            ":context": {"L": [*seen["context"]["L"], {"S": message}]},
            ":one": {"N": "1"},
            ":seen": seen["version"],
        },
    )


def _read(client: Any) -> dict[str, Any]:
    item: dict[str, Any] = client.get_item(TableName=TABLE, Key=KEY, ConsistentRead=True)["Item"]
    return item


def _messages(item: dict[str, Any]) -> list[str]:
    return [m["S"] for m in item.get("context", {"L": []})["L"]]


def _write(answer: Any, client: Any, writer: str, seen: dict[str, Any], message: str) -> bool:
    """Run ``answer`` as ``writer``: True if it wrote, False if its condition refused it."""
    try:
        answer(client, TABLE, KEY, seen, message)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ConditionalCheckFailedException":
            return False
        raise NotYet(
            f"DynamoDB rejected {writer}'s request: {error.get('Code')}: {error.get('Message')}. "
            "Every #name and :value the expressions use must be defined, and every one defined "
            "must be used."
        ) from None
    return True


def check_add_message(answer: Any, client: Any) -> str:
    """Two writers read version 2; Alice writes, then Bob writes on his stale read, then Bob
    retries on a fresh read. Alice's message must survive, and no current writer be refused."""
    schema.create_table(client, TABLE)
    client.put_item(
        TableName=TABLE,
        Item={**KEY, "version": {"N": str(START_VERSION)}, "context": {"L": []}},
    )
    alice_seen, bob_seen = _read(client), _read(client)  # both read version 2
    alice, bob = "Alice: book the 9:40 train", "Bob: one more thing"

    if not _write(answer, client, "Alice", alice_seen, alice):
        raise NotYet(
            f"Alice's write was refused, yet nobody had written since she read version "
            f"{START_VERSION}. The condition must hold on the item exactly as she read it: "
            "compare the version with the one in `seen`."
        )
    after_alice = _read(client)
    if int(after_alice["version"]["N"]) != START_VERSION + 1:
        raise NotYet(
            f"after Alice's write the version is {after_alice['version']['N']}, not "
            f"{START_VERSION + 1}: keep `#version = #version + :one` in the same request, or the "
            "next writer's condition cannot tell that anyone wrote."
        )

    if _write(answer, client, "Bob", bob_seen, bob):
        now = _messages(_read(client))
        raise NotYet(
            f"Bob wrote on his read of version {START_VERSION} after Alice had written version "
            f"{START_VERSION + 1}, and the context is now {now}: Alice's message is lost (a lost "
            "update). Hint: condition the write on the version its writer read: a "
            "ConditionExpression comparing #version with a :value that holds seen['version']."
        )

    fresh = _read(client)  # Bob re-reads, re-decides and tries again
    if not _write(answer, client, "Bob", fresh, bob):
        raise NotYet(
            f"Bob's retry on a fresh read (version {fresh['version']['N']}) was refused too: "
            "the condition must compare with the version the writer read, not a fixed one."
        )
    final = _read(client)
    if _messages(final) != [alice, bob] or int(final["version"]["N"]) != START_VERSION + 2:
        raise NotYet(
            f"after both writes the item holds {_messages(final)} at version "
            f"{final['version']['N']}; expected {[alice, bob]} at version {START_VERSION + 2}."
        )
    return (
        f"Bob's write on his stale read of version {START_VERSION} was refused "
        f"(ConditionalCheckFailedException) and Alice's message kept; his retry on a fresh read "
        f"landed: {_messages(final)}, version {final['version']['N']}."
    )


ADD_MESSAGE = Exercise("add_message", add_message, add_message_solution, check_add_message)
