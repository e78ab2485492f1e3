"""Exercise of notebook 05: the condition that guards a status move.

The learner writes ``guard(to)``: the condition an ``UpdateItem`` that sets ``status = to`` is
sent on, in the forms every exercise takes a condition (a condition value, or a plain expression
string without placeholders: ``checking.condition_params``). The checker tries every pair of
statuses: for each (from, to) it puts an item in status ``from`` and sends that one request on
the learner's condition, then compares what landed (read off the item's version) with
``lifecycle.TRANSITIONS``. An illegal move it accepted (a closed session re-opened) or a legal
one it refused is named, with a hint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sessionstore import schema
from sessionstore.conditions import Condition, Request, assign, item_to_wire
from sessionstore.item import Meta
from sessionstore.lifecycle import TRANSITIONS, sources, status_in, status_is
from sessionstore.locking import version_up
from sessionstore.models import Status
from sessionstore.tutorial.checking import Exercise, NotYet, call, condition_params, landed

__all__ = [
    "GUARD",
    "TABLE",
    "check_guard",
    "guard_solution",
    "guard_stub",
]

#: The checker's own table (created if missing; every item it uses is put afresh).
TABLE = "nb05-exercise-guards"


def guard_stub(to: Status) -> Condition:
    """The condition a move to ``to`` is sent on (an UpdateItem ``SET status = to``)."""
    # A first try: never re-open a closed session.
    # Which other moves does it let through?
    return ~status_is(Status.CLOSED)


def guard_solution(to: Status) -> Condition:
    # List what is allowed, not what is forbidden: the statuses the table lets `to`
    # be entered from. Everything else is refused, the status the session already
    # has included.
    return status_in(*sources(to))


def _moved(client: Any, condition: object, start: Status, to: Status) -> bool:
    """Put an item in ``start`` at version 1, send ``SET status = to, version = version + 1``
    on ``condition``: did it land? Read off the item, not off the response."""
    session_id = f"guard-{start.value}-{to.value}"
    key = schema.meta_key(session_id)
    item: dict[str, Any] = {
        Meta.PK: schema.pk(session_id),
        Meta.SK: schema.META_SK,
        Meta.STATUS: start.value,
        Meta.VERSION: 1,
    }
    client.put_item(TableName=TABLE, Item=item_to_wire(item))
    r = Request()  # one request's placeholders: the update's and the condition's
    update = (assign(Meta.STATUS, to.value) + version_up()).render(r)
    request: dict[str, Any] = {"TableName": TABLE, "Key": key, "UpdateExpression": update}
    request.update(condition_params(condition, f"guard({to.value!r})", r))
    landed(lambda: client.update_item(**request), f"the move {start.value} -> {to.value}")
    after = client.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]
    return bool(after[Meta.VERSION]["N"] != "1")


def check_guard(answer: Callable[[Status], object], client: Any) -> str:
    """Every (from, to) pair of statuses, one item and one guarded UpdateItem each."""
    schema.create_table(client, TABLE)
    accepted: list[str] = []  # moves the table forbids that landed
    refused: list[str] = []  # moves the table allows that did not
    conditions: dict[Status, object] = {}
    for to in Status:
        conditions[to] = call(answer, to, who=f"guard({to.value!r})")
        condition_params(conditions[to], f"guard({to.value!r})")  # a form the checker takes
    for start in Status:
        for to, condition in conditions.items():
            legal = to in TRANSITIONS[start]
            if _moved(client, condition, start, to) != legal:
                (refused if legal else accepted).append(f"{start.value} -> {to.value}")
    if accepted:
        raise NotYet(
            f"{len(accepted)} moves the table forbids were written: {', '.join(accepted)}. "
            "Refusing the moves you thought of lets through the ones you did not: list the "
            "statuses `to` may be entered FROM (lifecycle.sources(to), read off TRANSITIONS), and "
            "the condition refuses everything else -- the status it already has too."
        )
    if refused:
        raise NotYet(
            f"{len(refused)} moves the table allows were refused: {', '.join(refused)}. "
            "Every status `to` may be entered from (lifecycle.sources(to)) must pass."
        )
    allowed = sum(len(targets) for targets in TRANSITIONS.values())
    return (
        f"all {len(Status) ** 2} moves as TRANSITIONS says: the {allowed} it lists written, the "
        f"other {len(Status) ** 2 - allowed} refused -- closed stays closed, and asking for the "
        "status a session already has writes nothing"
    )


GUARD = Exercise("guard", guard_stub, guard_solution, check_guard)
