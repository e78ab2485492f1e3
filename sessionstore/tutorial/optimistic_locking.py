"""Notebook 02's exercise: make a read-modify-write safe with the version condition.

``add_message`` writes back the context list its writer read plus one message, the way two
servers would in the source design's layout (the context as a list inside the metadata item).
Without a condition the second of two interleaved writers silently drops the first one's message;
the learner adds the clause that refuses a stale writer. ``check_add_message`` runs two writers on
the embedded engine in the unlucky order (both read, Alice writes, Bob writes) and says whether
Bob's write lost Alice's message, or whether a writer whose read was current was refused. Each
verdict is read off the item, so an answer that checks the version in Python and quietly skips
the write is told so; and a rival writes between the answer's own reads and its write (a hook on
the client, just before the write is sent), so such a check cannot pass by luck of timing.
"""

from __future__ import annotations

from typing import Any

from .. import schema
from ..testing.hooks import Hooks
from .checking import Exercise, NotYet, landed, quote

__all__ = [
    "ADD_MESSAGE",
    "KEY",
    "START_VERSION",
    "TABLE",
    "add_message",
    "add_message_solution",
    "check_add_message",
]

#: The checker's own table and item (recreated item by item: every run starts the same).
TABLE = "nb02-exercise-locking"
KEY = {"pk": {"S": "session#exercise"}, "sk": {"S": "metadata"}}
START_VERSION = 2


def add_message(
    client: Any, table: str, key: dict[str, Any], seen: dict[str, Any], message: str
) -> None:
    """Write back the context list this writer read (``seen``: the item as it read
    it, in DynamoDB's wire form) plus ``message``, and move the version up by one in
    the same request.
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
    # Only if the version is still the one this writer read.
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


def _state(item: dict[str, Any]) -> str:
    return f"{_messages(item)} at version {item['version']['N']}"


def _reset() -> dict[str, Any]:
    return {**KEY, "version": {"N": str(START_VERSION)}, "context": {"L": []}}


def _write(answer: Any, client: Any, writer: str, seen: dict[str, Any], message: str) -> bool:
    """Run ``answer`` as ``writer``: False if DynamoDB's condition refused it, True if the
    call returned (whether it wrote is for the caller to read off the item)."""
    try:
        return landed(lambda: answer(client, TABLE, KEY, seen, message), f"{writer}'s request")
    except NotYet:
        raise
    except Exception as exc:
        raise NotYet(
            f"{writer}'s call raised {quote(exc)}. Hint: send the write and let DynamoDB "
            "refuse it -- a ConditionExpression comparing #version with seen['version']; it "
            "raises ConditionalCheckFailedException, the refusal the caller catches. A check "
            "in Python leaves a gap between its read and the write."
        ) from None


def _silent(writer: str, item: dict[str, Any]) -> NotYet:
    return NotYet(
        f"{writer}'s call returned, yet the item still holds {_state(item)}: nothing was "
        "written and nothing refused, so the caller believes the message was added. A "
        "version check in Python skips the write without telling anyone, and leaves a gap "
        "between its read and the write. Hint: put the comparison in the request, a "
        "ConditionExpression; DynamoDB then refuses a stale write with "
        "ConditionalCheckFailedException."
    )


class _Rival(Hooks):
    """Writes Carol's message the moment the answer's client is about to send a write: a
    rival landing between whatever the answer read and its own write."""

    def __init__(self, client: Any, message: str) -> None:
        super().__init__(client)
        for operation in ("UpdateItem", "PutItem", "TransactWriteItems"):
            self.on(f"before-call.dynamodb.{operation}", self)
        self.message, self.done = message, False

    def __call__(self, **_: Any) -> None:
        if self.done:
            return
        self.done = True  # first: the rival's own write passes through this hook too
        item = _read(self.client)
        self.client.put_item(
            TableName=TABLE,
            Item={
                **item,
                "context": {"L": [*item["context"]["L"], {"S": self.message}]},
                "version": {"N": str(int(item["version"]["N"]) + 1)},
            },
        )


def check_add_message(answer: Any, client: Any) -> str:
    """Two writers read version 2; Alice writes, then Bob writes on his stale read, then Bob
    retries on a fresh read; then a rival writes between Dan's read and his write. Each
    verdict is read off the item: Alice's message must survive, the rival's too, and no
    writer whose read was current be refused."""
    schema.create_table(client, TABLE)
    client.put_item(TableName=TABLE, Item=_reset())
    alice_seen, bob_seen = _read(client), _read(client)  # both read version 2
    alice, bob = "Alice: book the 9:40 train", "Bob: one more thing"

    if not _write(answer, client, "Alice", alice_seen, alice):
        raise NotYet(
            f"Alice's write was refused, yet nobody had written since she read version "
            f"{START_VERSION}. The condition must hold on the item exactly as she read it: "
            "compare the version with the one in `seen`."
        )
    after_alice = _read(client)
    if _messages(after_alice) != [alice]:
        if after_alice == alice_seen:
            raise _silent("Alice", after_alice)
        raise NotYet(
            f"after Alice's write the item holds {_state(after_alice)}; expected "
            f"{[alice]}: write back the list she read plus her message."
        )
    if int(after_alice["version"]["N"]) != START_VERSION + 1:
        raise NotYet(
            f"after Alice's write the version is {after_alice['version']['N']}, not "
            f"{START_VERSION + 1}: keep `#version = #version + :one` in the same request, or the "
            "next writer's condition cannot tell that anyone wrote."
        )

    if _write(answer, client, "Bob", bob_seen, bob):
        now = _read(client)
        if now == after_alice:
            raise _silent("Bob", now)
        raise NotYet(
            f"Bob wrote on his read of version {START_VERSION} after Alice had written version "
            f"{START_VERSION + 1}, and the item now holds {_state(now)}: Alice's message is "
            "lost (a lost update). Hint: condition the write on the version its writer read: "
            "a ConditionExpression comparing #version with a :value that holds "
            "seen['version']."
        )
    fresh = _read(client)  # also Bob's re-read: he re-decides and tries again
    if fresh != after_alice:
        raise NotYet(f"Bob's refused write still changed the item: {_state(fresh)}.")

    if not _write(answer, client, "Bob", fresh, bob):
        raise NotYet(
            f"Bob's retry on a fresh read (version {fresh['version']['N']}) was refused too: "
            "the condition must compare with the version the writer read, not a fixed one."
        )
    final = _read(client)
    if _messages(final) != [alice, bob] or int(final["version"]["N"]) != START_VERSION + 2:
        raise NotYet(
            f"after both writes the item holds {_state(final)}; expected {[alice, bob]} at "
            f"version {START_VERSION + 2}."
        )

    # The race itself: Carol writes after Dan read, just before Dan's write is sent.
    client.put_item(TableName=TABLE, Item=_reset())
    dan_seen, carol, dan = _read(client), "Carol: window seat", "Dan: and a taxi"
    with _Rival(client, carol) as rival:
        wrote = _write(answer, client, "Dan", dan_seen, dan)
    raced = _read(client)
    if rival.done and wrote and carol not in _messages(raced):
        raise NotYet(
            f"Carol wrote between Dan's read and his write, then Dan's write landed: the item "
            f"holds {_state(raced)}, Carol's message is lost. Whatever the answer read first, "
            "only a condition in the write request itself is checked where the write lands. "
            "Hint: a ConditionExpression comparing #version with seen['version']."
        )
    if wrote and raced["version"]["N"] == str(START_VERSION + 1) and rival.done:
        raise _silent("Dan", raced)
    return (
        f"Bob's write on his stale read of version {START_VERSION} was refused "
        f"(ConditionalCheckFailedException) and Alice's message kept; his retry on a fresh read "
        f"landed: {_messages(final)}, version {final['version']['N']}. A rival write between "
        "a read and its write was refused the same way."
    )


ADD_MESSAGE = Exercise("add_message", add_message, add_message_solution, check_add_message)
