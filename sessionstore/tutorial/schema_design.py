"""Exercises of notebook 01 (schema design): the keys of the single-table layout.

``PAGES_ONLY``: the key condition of a Query that reads one session's context pages and nothing
else. ``TOOL_CALL_KEY``: the key of a tool-call item, the same on every delivery of the call.

Both checkers fill a table of their own (``TABLE``, recreated on every check, so a check always
sees the same items): alice's session ``s-0001`` with its metadata, its attributes, three context
pages and two tool calls, and a second session with a page of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError, ParamValidationError

from .. import schema
from . import fresh_store
from .checking import Exercise, NotYet, call, refusal

__all__ = [
    "OTHER",
    "PAGES_ONLY",
    "RECORDED",
    "REDELIVERED",
    "SESSION",
    "TABLE",
    "TOOL_CALL_KEY",
    "check_pages_only",
    "check_tool_call_key",
    "pages_only_solution",
    "pages_only_stub",
    "tool_call_key_solution",
    "tool_call_key_stub",
]

TABLE = "nb01-exercise"
SESSION = "s-0001"
OTHER = "s-0002"
#: When each tool call of ``SESSION`` was recorded (the checker's clock), and a later delivery.
RECORDED = {"call-7f3a": "2026-01-01T12:00:05.000Z", "call-1c9e": "2026-01-01T12:00:07.000Z"}
REDELIVERED = "2026-01-01T12:00:30.000Z"


def _fill(client: Any) -> list[str]:
    """Recreate ``TABLE`` and write the two sessions; the page keys of ``SESSION``."""
    t = fresh_store(TABLE, client=client)
    store, clock = t.store, t.clock
    store.create_session(owner="alice", ttl_seconds=3600)  # SESSION: the first counter id
    clock.advance(seconds=1)
    store.activate(SESSION, owner="alice")
    store.update_attributes(SESSION, {"locale": "pt-PT"}, owner="alice")
    clock.advance(seconds=1)
    store.append_context(SESSION, [{"role": "user", "content": "Lisbon, Friday?"}], owner="alice")
    clock.advance(seconds=1)
    store.append_context(SESSION, [{"role": "assistant", "content": "Looking."}], owner="alice")
    for call_id, tool in (("call-7f3a", "search_flights"), ("call-1c9e", "get_weather")):
        clock.advance(seconds=2)
        store.record_tool_call(
            SESSION, call_id, tool, {"city": "LIS"}, {"ok": True}, 90, owner="alice"
        )
    clock.advance(seconds=1)
    store.append_context(SESSION, [{"role": "assistant", "content": "TP1300."}], owner="alice")
    store.create_session(owner="bob")  # OTHER
    store.activate(OTHER, owner="bob")
    store.append_context(OTHER, [{"role": "user", "content": "Hello"}], owner="bob")
    return [schema.page_sk(seq) for seq in range(3)]


def _what(pk: str, sk: str) -> str:
    if pk != schema.pk(SESSION):
        return f"{sk} of {pk} (another session)"
    if sk == schema.META_SK:
        return f"{sk} (the metadata item)"
    if sk == schema.ATTRS_SK:
        return f"{sk} (the attributes item)"
    return f"{sk} (a tool call)"


# ---------------------------------------------------------------------------- pages only


def pages_only_stub(session_id: str) -> dict[str, Any]:
    """The parameters of a Query that reads this session's context pages and
    nothing else."""
    return {
        "KeyConditionExpression": "#pk = :pk",
        "ExpressionAttributeNames": {"#pk": "pk"},
        "ExpressionAttributeValues": {":pk": {"S": schema.pk(session_id)}},
    }


def pages_only_solution(session_id: str) -> dict[str, Any]:
    return {
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :page)",
        "ExpressionAttributeNames": {"#pk": "pk", "#sk": "sk"},
        "ExpressionAttributeValues": {
            ":pk": {"S": schema.pk(session_id)},
            ":page": {"S": schema.PAGE_PREFIX},  # every page's key is msg#<last seq>
        },
    }


_QUERY_PARAMETERS = {
    "KeyConditionExpression",
    "ExpressionAttributeNames",
    "ExpressionAttributeValues",
}


def check_pages_only(answer: Callable[[str], dict[str, Any]], client: Any) -> str:
    """Run the answer's key condition as a Query on the checker's table; say which items came
    back that are not the session's pages, and which pages did not."""
    pages = _fill(client)
    params = call(answer, SESSION)
    if isinstance(params, str):
        raise NotYet(
            f"the answer returned the string {params!r}: a key condition alone carries no "
            "values. Hint: return the Query's parameters, a dict with KeyConditionExpression "
            "and the placeholders it uses (ExpressionAttributeNames, ExpressionAttributeValues)"
        )
    if not isinstance(params, dict) or "KeyConditionExpression" not in params:
        raise NotYet(
            "return the Query's parameters: a dict with KeyConditionExpression and the "
            "placeholders it uses (ExpressionAttributeNames, ExpressionAttributeValues)"
        )
    extra = sorted(set(params) - _QUERY_PARAMETERS)
    if extra:
        raise NotYet(
            f"only the key condition and its placeholders, please: not {', '.join(extra)}. "
            "A FilterExpression still reads, and bills, every item it drops; the key condition "
            "decides what is read"
        )
    try:
        items = client.query(TableName=TABLE, ConsistentRead=True, **params)["Items"]
    except (ClientError, ParamValidationError) as exc:
        raise refusal(exc, "the Query") from None
    got = [(i["pk"]["S"], i["sk"]["S"]) for i in items]
    own = schema.pk(SESSION)
    wrong = [_what(pk, sk) for pk, sk in got if pk != own or sk not in pages]
    missing = [sk for sk in pages if (own, sk) not in got]
    problems = []
    if wrong:
        problems.append(
            f"{len(wrong)} item(s) came back that are not {SESSION}'s context pages: "
            + ", ".join(wrong)
        )
    if missing:
        problems.append(f"{len(missing)} page(s) did not come back: {', '.join(missing)}")
    if problems:
        if wrong:
            hint = (
                f"every page's key, and no other item's, begins with {schema.PAGE_PREFIX!r} "
                "(schema.PAGE_PREFIX)"
            )
            if " and " not in str(params["KeyConditionExpression"]).lower():
                hint = f"`#pk = :pk` alone selects the whole partition; {hint}"
        else:
            hint = (
                f"a range must reach the last page's key; {schema.PAGES_END!r} lies just past "
                "every page's (schema.PAGES_END)"
            )
        raise NotYet("; ".join(problems) + ". Hint: " + hint)
    return (
        f"one Query read the {len(pages)} pages {pages[0]} .. {pages[-1]} and nothing else: "
        "not the metadata, the attributes, the 2 tool calls, nor the other session's page"
    )


PAGES_ONLY = Exercise("pages_only", pages_only_stub, pages_only_solution, check_pages_only)


# ---------------------------------------------------------------------------- tool-call key


def tool_call_key_stub(
    session_id: str,
    tool_call_id: str,
    recorded_at: str,
) -> dict[str, Any]:
    """The key of the item that holds this tool call (``recorded_at``: this
    delivery's time)."""
    return {
        "pk": {"S": schema.pk(session_id)},
        "sk": {"S": f"tool#{recorded_at}#{tool_call_id}"},
    }


def tool_call_key_solution(
    session_id: str,
    tool_call_id: str,
    recorded_at: str,
) -> dict[str, Any]:
    # The id alone in the sort key: the same on every delivery.
    return {
        "pk": {"S": schema.pk(session_id)},
        "sk": {"S": schema.tool_sk(tool_call_id)},
    }


def check_tool_call_key(answer: Callable[[str, str, str], dict[str, Any]], client: Any) -> str:
    """For each recorded call, a GetItem at the key the answer gives for a later delivery of it
    must find the recorded item."""
    _fill(client)
    for call_id, recorded_at in RECORDED.items():
        key = call(answer, SESSION, call_id, REDELIVERED)
        if not isinstance(key, dict) or set(key) != {"pk", "sk"}:
            raise NotYet(
                f"the answer returned {key!r} as the key: return the GetItem's Key, a dict "
                "of exactly pk and sk, each in wire form ({'S': '...'})"
            )
        try:
            item = client.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")
        except (ClientError, ParamValidationError) as exc:
            raise refusal(exc, "the GetItem") from None
        if item is None or item.get("toolCallId", {}).get("S") != call_id:
            sk = key.get("sk", {}).get("S")
            raise NotYet(
                f"{call_id} was recorded at {recorded_at[11:19]} and delivered again at "
                f"{REDELIVERED[11:19]}: a GetItem at sk {sk!r} found no record of it. A key with a "
                "time in it is a new key on every delivery, so nothing at it says the call is "
                "already recorded. Key the item by what every delivery of the call shares"
            )
    return (
        f"a later delivery of each of {', '.join(RECORDED)} names the item its first delivery "
        "wrote, so one conditional put at that key can refuse the repeat"
    )


TOOL_CALL_KEY = Exercise(
    "tool_call_key", tool_call_key_stub, tool_call_key_solution, check_tool_call_key
)
