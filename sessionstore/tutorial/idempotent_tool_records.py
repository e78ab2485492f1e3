"""Exercise of notebook 04: the key and the condition that record a tool call exactly once.

The learner's answer is ``(tool_call_id, fingerprint, now) -> (sort_key, condition)``: the sort
key of the call's item and the condition of its PutItem (a ``sessionstore.conditions`` value, or
a plain expression string without placeholders: ``checking.condition_params``, as in 05).
Every delivery of a call computes them again, with its own ``now``. The checker sends a call
through them on a table of its own, as production does: a first delivery whose response is lost
(botocore sends the very same request again), the same request replayed by a second instance
five minutes later (its re-run answered differently), a different request under the same id,
and another call. It counts the items each leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import tool_calls
from ..codec import JSON, encode
from ..conditions import Condition, absent, item_to_wire, to_wire
from ..testing.faults import Fault, FaultInjector
from .checking import Exercise, NotYet, call, condition_params, landed, own_table

__all__ = [
    "CALL",
    "DIFFERENT",
    "FIRST",
    "OTHER",
    "RECORD_ONCE",
    "SECOND",
    "SESSION",
    "TABLE",
    "Answer",
    "Delivery",
    "check_record_once",
    "record_once",
    "record_once_solution",
]

#: The checker's own table, recreated on every check.
TABLE = "nb04-exercise-tool-calls"
SESSION = "session#s-0001"
CALL = "call-0001"

Answer = Callable[[str, str, str], tuple[str, Condition | str]]


def record_once(
    tool_call_id: str,
    fingerprint: str,
    now: str,
) -> tuple[str, Condition | str]:
    """The sort key of a tool call's item and the condition of its PutItem.
    ``fingerprint``: a digest of the tool name and input; ``now``: when this
    delivery writes."""
    # The source design's key: the time of this delivery is in it.
    sort_key = f"tool#{now}#{tool_call_id}"
    condition = absent("pk")  # attribute_not_exists(pk): no item with this key yet
    return sort_key, condition


def record_once_solution(
    tool_call_id: str,
    fingerprint: str,
    now: str,
) -> tuple[str, Condition | str]:
    # The id alone: every delivery of the call names one item.
    sort_key = f"tool#{tool_call_id}"
    condition = absent("pk")  # holds for the first delivery only, whatever its time
    return sort_key, condition


@dataclass(frozen=True)
class Delivery:
    """One delivery of a tool call, as the checker sends it."""

    what: str
    tool_call_id: str
    now: str
    input: JSON
    output: JSON
    lost: bool = False  # its first attempt lands, its response is lost: botocore sends it again

    @property
    def fingerprint(self) -> str:
        return tool_calls.fingerprint("web_search", self.input)


FIRST = Delivery(
    "the first delivery", CALL, "2026-01-01T12:00:00.000Z", {"q": "ttl"}, {"hits": 3}, lost=True
)
SECOND = Delivery(
    "the second instance's replay", CALL, "2026-01-01T12:05:00.000Z", {"q": "ttl"}, {"hits": 4}
)
DIFFERENT = Delivery(
    "a different request under call-0001",
    CALL,
    "2026-01-01T12:06:00.000Z",
    {"q": "ttl units"},
    {"hits": 9},
)
OTHER = Delivery(
    "another call, call-0002", "call-0002", "2026-01-01T12:07:00.000Z", {"q": "gsi"}, {"hits": 1}
)


def _request(answer: Answer, delivery: Delivery) -> dict[str, Any]:
    answered = call(answer, delivery.tool_call_id, delivery.fingerprint, delivery.now)
    if not isinstance(answered, tuple) or len(answered) != 2:
        raise NotYet(
            f"the answer returned {answered!r}: return two things, the sort key and the "
            "condition (`return sort_key, condition`)"
        )
    sort_key, condition = answered
    if not isinstance(sort_key, str) or not sort_key:
        raise NotYet(f"the sort key must be a non-empty string, not {sort_key!r}")
    item = item_to_wire(
        {
            "pk": SESSION,
            "sk": sort_key,
            "toolCallId": delivery.tool_call_id,
            "fingerprint": delivery.fingerprint,
            "output": encode(delivery.output, "output"),
            "recordedAt": delivery.now,
        }
    )
    request: dict[str, Any] = {"TableName": TABLE, "Item": item}
    request.update(condition_params(condition, "the answer"))
    if "ConditionExpression" in request:
        request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return request


def _send(client: Any, answer: Answer, delivery: Delivery) -> bool:
    """Put the delivery's item; True if it landed, False if its condition refused it."""
    request = _request(answer, delivery)
    script = [Fault.LOST_RESPONSE] if delivery.lost else []
    with FaultInjector(client, script=script, operations={"PutItem"}):
        return landed(lambda: client.put_item(**request), f"{delivery.what}'s request")


def _items(client: Any, tool_call_id: str) -> list[dict[str, str]]:
    """The items holding ``tool_call_id``, as (sk, recordedAt, fingerprint) strings."""
    response = client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        FilterExpression="toolCallId = :id",
        ExpressionAttributeValues={":pk": to_wire(SESSION), ":id": to_wire(tool_call_id)},
        ConsistentRead=True,
    )
    fields = ("sk", "recordedAt", "fingerprint")
    return [{f: item[f]["S"] for f in fields} for item in response["Items"]]


def _keys(items: list[dict[str, str]]) -> str:
    return ", ".join(repr(item["sk"]) for item in items)


def _deliver(client: Any, answer: Answer) -> str:
    # 1. A lost response: botocore's retry is the very same request, on the item it wrote.
    _send(client, answer, FIRST)
    held = _items(client, CALL)
    if not held:
        raise NotYet(
            "the first delivery's put was refused on an empty table: nothing is recorded. "
            "Hint: the condition must hold while no item has the call's key."
        )
    if len(held) > 1:
        raise NotYet(
            f"botocore's retry after a lost response -- the same request again -- wrote a "
            f"second item: {_keys(held)}. Hint: a key every delivery computes alike."
        )
    # 2. The same request from another instance, later, its re-run answering differently.
    landed = _send(client, answer, SECOND)
    held = _items(client, CALL)
    if len(held) > 1:
        raise NotYet(
            f"{SECOND.what} at 12:05 landed beside the first record: {len(held)} items for "
            f"{CALL} ({_keys(held)}). A condition only ever looks at the item with the exact "
            f"key it is sent with: a key that changes between deliveries (the time in it, say) "
            f"names a new, empty item each time. Hint: key the item by what every delivery of "
            f"the call shares."
        )
    if landed or held[0]["recordedAt"] != FIRST.now:
        raise NotYet(
            f"{SECOND.what} was accepted: it replaced the record of 12:00 with its own "
            f"(recordedAt {held[0]['recordedAt']}). The first answer must stand. "
            f"Hint: a condition that is false once the call's item exists."
        )
    # 3. Another request under the same id: refused, so the caller can tell it from a repeat.
    landed = _send(client, answer, DIFFERENT)
    held = _items(client, CALL)
    if landed or len(held) > 1 or held[0]["fingerprint"] != FIRST.fingerprint:
        raise NotYet(
            f"{DIFFERENT.what} (other input) was accepted: {len(held)} item(s) for {CALL} "
            f"({_keys(held)}), and nothing tells the caller its id was already used. "
            f"Hint: the id names the call; the input belongs in the item, not in its key."
        )
    # 4. Another call: an item of its own.
    if not _send(client, answer, OTHER) or len(_items(client, OTHER.tool_call_id)) != 1:
        raise NotYet(
            f"{OTHER.what} was refused: its key is call-0001's ({_keys(held)}). "
            f"Hint: the call's id belongs in the key."
        )
    return (
        f"one item for {CALL} ({held[0]['sk']!r}): botocore's retry after a lost response, "
        f"{SECOND.what} and {DIFFERENT.what} were each refused by the condition, and the "
        f"record of 12:00 stands; call-0002 got an item of its own."
    )


def check_record_once(answer: Answer, client: Any) -> str:
    """Send a tool call's deliveries through ``answer``'s key and condition, on a table of the
    checker's own (recreated, then dropped), and count the items they leave."""
    with own_table(client, TABLE):
        return _deliver(client, answer)


RECORD_ONCE = Exercise("record_once", record_once, record_once_solution, check_record_once)
