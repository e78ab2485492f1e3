"""The exercises of the core notebooks check themselves, both ways.

For every ``Exercise`` in ``sessionstore.tutorial``: the checker refuses the unsolved stub and
accepts the solution, on the embedded engine; and the notebook named like the module shows the
stub (a cell tagged ``exercise``) and the solution (a cell tagged ``solution``, hidden by default)
as the module holds them. A checker that cannot fail would pass the stub: that fails here. And
a list of wrong answers per exercise, each told its mistake in a few lines.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import sessionstore.tutorial as tutorial_package
from sessionstore.conditions import absent, exists
from sessionstore.lifecycle import TRANSITIONS, sources, status_in
from sessionstore.tutorial.checking import WIDTH, Exercise
from sessionstore.tutorial.context_pages import page_once, reserve
from sessionstore.tutorial.idempotent_tool_records import RECORD_ONCE, record_once
from sessionstore.tutorial.lifecycle_guards import GUARD, guard_stub
from sessionstore.tutorial.optimistic_locking import add_message
from sessionstore.tutorial.schema_design import pages_only_stub, tool_call_key_stub

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _modules() -> list[Any]:
    names = [m.name for m in pkgutil.iter_modules(tutorial_package.__path__)]
    return [importlib.import_module(f"sessionstore.tutorial.{name}") for name in sorted(names)]


def _exercises() -> list[tuple[Any, Exercise]]:
    return [
        (module, value)
        for module in _modules()
        for value in vars(module).values()
        if isinstance(value, Exercise)
    ]


def _notebook(module: Any) -> dict[str, Any]:
    short = module.__name__.rsplit(".", 1)[-1]
    (path,) = NOTEBOOKS.glob(f"[0-9][0-9]_{short}.ipynb")
    notebook: dict[str, Any] = json.loads(path.read_text())
    return notebook


def _unnamed(text: str) -> str:
    """Source with every function's name left out: the notebook names the stub and the solution
    alike (the learner's function), the module cannot."""
    return re.sub(r"\bdef \w+\(", "def _(", text)


def _source(fn: Any) -> str:
    return _unnamed(textwrap.dedent(inspect.getsource(fn)).strip())


def test_every_core_notebook_has_an_exercise() -> None:
    names = {m.__name__.rsplit(".", 1)[-1] for m, _ in _exercises()}
    core = {p.stem[3:] for p in NOTEBOOKS.glob("0[1-5]_*.ipynb")}
    assert core <= names, f"core notebooks without an exercise: {sorted(core - names)}"


@pytest.mark.parametrize(("module", "exercise"), _exercises(), ids=lambda v: getattr(v, "name", ""))
def test_the_stub_fails_and_the_solution_passes(
    module: Any, exercise: Exercise, client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    context = module.context(client) if hasattr(module, "context") else (client,)
    assert exercise.verdict(exercise.stub, *context).startswith("Not yet: ")
    assert exercise.verdict(exercise.solution, *context).startswith("Correct: ")
    exercise.check(exercise.stub, *context)  # what the notebook shows
    assert capsys.readouterr().out.startswith("Not yet: ")


@pytest.mark.parametrize(("module", "exercise"), _exercises(), ids=lambda v: getattr(v, "name", ""))
def test_the_notebook_shows_the_stub_and_hides_the_answer(module: Any, exercise: Exercise) -> None:
    cells = _notebook(module)["cells"]
    shown = {
        tag: [
            _unnamed("".join(c["source"]))
            for c in cells
            if tag in c.get("metadata", {}).get("tags", [])
        ]
        for tag in ("exercise", "solution")
    }
    stub, solution = _source(exercise.stub), _source(exercise.solution)
    assert any(stub in text for text in shown["exercise"]), f"{exercise.name}: stub not shown"
    hidden = [
        c
        for c in cells
        if "solution" in c.get("metadata", {}).get("tags", [])
        and solution in _unnamed("".join(c["source"]))
    ]
    assert hidden, f"{exercise.name}: no cell tagged solution holds the solution"
    assert all(c["metadata"].get("jupyter", {}).get("source_hidden") for c in hidden)


# ---------------------------------------------------------------------------- wrong answers
#
# Each exercise's likely mistakes, as a learner would write them: the checker must say
# "Not yet", name the mistake (the fragment each lists), and say it in at most 12 lines of a
# cell's output -- no traceback, whatever the answer raises or sends.

MAX_LINES = 12


def _update(client: Any, table: str, key: Any, seen: Any, message: str, **extra: Any) -> None:
    names = {"#context": "context", "#version": "version"}
    values = {":context": {"L": [*seen["context"]["L"], {"S": message}]}, ":one": {"N": "1"}}
    names.update(extra.pop("names", {}))
    values.update(extra.pop("values", {}))
    client.update_item(
        TableName=table,
        Key=key,
        UpdateExpression=extra.pop("update", "SET #context = :context, #version = #version + :one"),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=values,
        **extra,
    )


def _current_version(client: Any, table: str, key: Any) -> Any:
    return client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["version"]


def _checks_in_python(client: Any, table: str, key: Any, seen: Any, message: str) -> None:
    if _current_version(client, table, key) == seen["version"]:  # read, compare, then write
        _update(client, table, key, seen, message)


def _raises_its_own_error(client: Any, table: str, key: Any, seen: Any, message: str) -> None:
    if _current_version(client, table, key) != seen["version"]:
        raise RuntimeError("stale read: someone wrote first")
    _update(client, table, key, seen, message)


def _raises_a_refusal_itself(client: Any, table: str, key: Any, seen: Any, message: str) -> None:
    if _current_version(client, table, key) != seen["version"]:
        error: Any = {"Error": {"Code": "ConditionalCheckFailedException", "Message": "stale"}}
        raise ClientError(error, "UpdateItem")  # looks like DynamoDB's refusal; it is not
    _update(client, table, key, seen, message)


def _conditions_on_a_fresh_read(client: Any, table: str, key: Any, seen: Any, msg: str) -> None:
    fresh = _current_version(client, table, key)
    _update(
        client,
        table,
        key,
        seen,
        msg,
        ConditionExpression="#version = :seen",
        values={":seen": fresh},
    )


def _no_version_bump(client: Any, table: str, key: Any, seen: Any, message: str) -> None:
    client.update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET #context = :context",
        ConditionExpression="#version = :seen",
        ExpressionAttributeNames={"#context": "context", "#version": "version"},
        ExpressionAttributeValues={
            ":context": {"L": [*seen["context"]["L"], {"S": message}]},
            ":seen": seen["version"],
        },
    )


def _locking(condition: str | None, values: dict[str, Any], **extra: Any) -> Any:
    def answer(client: Any, table: str, key: Any, seen: Any, message: str) -> None:
        more = {"ConditionExpression": condition} if condition else {}
        vals = {k: (v(seen) if callable(v) else v) for k, v in values.items()}
        _update(client, table, key, seen, message, values=vals, **more, **extra)

    return answer


def _raise(exc: Exception) -> Any:
    def answer(*_: Any) -> Any:
        raise exc

    return answer


def _pages(condition: str, names: dict[str, str], values: dict[str, Any], **more: Any) -> Any:
    return lambda sid: {
        "KeyConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {":pk": {"S": f"session#{sid}"}, **values},
        **more,
    }


_PK_SK = {"#pk": "pk", "#sk": "sk"}
_PAGE = {":page": {"S": "msg#"}}


def _reserve(condition: str, room: Any, returns: str = "UPDATED_OLD", n_wire: Any = None) -> Any:
    def answer(n: int, limit: int) -> dict[str, Any]:
        values = {":n": n_wire(n) if n_wire else {"N": str(n)}, ":active": {"S": "active"}}
        if ":room" in condition:
            values[":room"] = {"N": str(room(n, limit))}
        params = {
            "UpdateExpression": "SET messageCount = messageCount + :n",
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": values,
            "ReturnValues": returns,
        }
        if condition:
            params["ConditionExpression"] = condition
        else:
            del params["ExpressionAttributeNames"], values[":active"]
        return params

    return answer


_ACTIVE_ROOM = "#status = :active AND messageCount <= :room"


def _page_once(condition: str, names: dict[str, str], now: Any) -> Any:
    def answer(now_s: int) -> dict[str, Any]:
        params: dict[str, Any] = {"ConditionExpression": condition}
        if names:
            params["ExpressionAttributeNames"] = names
        if now is not None:
            params["ExpressionAttributeValues"] = {":now": now(now_s)}
        return params

    return answer


def _record(sort_key: Any, condition: Any) -> Any:
    return lambda call_id, fingerprint, now: (sort_key(call_id, fingerprint, now), condition)


_BY_ID = lambda call_id, _f, _n: f"tool#{call_id}"  # noqa: E731


WRONG: dict[str, list[tuple[str, Any, str]]] = {
    "pages_only": [
        ("the partition alone", pages_only_stub, "came back that are not"),
        (
            "a filter",
            _pages("#pk = :pk", _PK_SK, _PAGE, FilterExpression="begins_with(#sk, :page)"),
            "FilterExpression",
        ),
        ("a plain string", lambda sid: "pk = session#s-0001", "the string"),
        (
            "a value not in wire form",
            lambda sid: {
                "KeyConditionExpression": "#pk = :pk",
                "ExpressionAttributeNames": {"#pk": "pk"},
                "ExpressionAttributeValues": {":pk": f"session#{sid}"},
            },
            "wire form",
        ),
        (
            "an undefined placeholder",
            _pages("#pk = :pk AND begins_with(#sk, :page)", _PK_SK, {}),
            "must be defined",
        ),
        (
            "the wrong prefix",
            _pages("#pk = :pk AND begins_with(#sk, :page)", _PK_SK, {":page": {"S": "metadata"}}),
            "came back that are not",
        ),
        ("an exception", _raise(KeyError("pk")), "raised KeyError"),
    ],
    "tool_call_key": [
        ("the time in the key", tool_call_key_stub, "found no record"),
        ("plain strings", lambda s, c, r: {"pk": f"session#{s}", "sk": f"tool#{c}"}, "wire form"),
        ("a string", lambda s, c, r: f"tool#{c}", "as the key"),
        ("an exception", _raise(ValueError("no key")), "raised ValueError"),
    ],
    "add_message": [
        ("no condition", add_message, "Alice's message is lost"),
        ("a version check in Python", _checks_in_python, "nothing was written and nothing refused"),
        ("its own error", _raises_its_own_error, "Bob's call raised RuntimeError"),
        ("a refusal of its own", _raises_a_refusal_itself, "Carol's message is lost"),
        ("a condition on a fresh read", _conditions_on_a_fresh_read, "Alice's message is lost"),
        (
            "the version as a plain string",
            _locking("#version = :seen", {":seen": lambda seen: seen["version"]["N"]}),
            "wire form",
        ),
        (
            "the version as an int",
            _locking("#version = :seen", {":seen": lambda seen: int(seen["version"]["N"])}),
            "wire form",
        ),
        ("an undefined placeholder", _locking("#version = :seen", {}), "must be defined"),
        (
            "a fixed version",
            _locking("#version = :seen", {":seen": {"N": "2"}}),
            "retry on a fresh read",
        ),
        ("no version bump", _no_version_bump, "version is 2"),
        (
            "only that the item exists",
            _locking("attribute_exists(pk)", {}),
            "Alice's message is lost",
        ),
    ],
    "reserve": [
        ("the count after", reserve, "that is messageCount after the write"),
        ("no condition", _reserve("", None), "took 2 messages"),
        (
            "arithmetic in the condition",
            _reserve("#status = :active AND messageCount + :n <= :room", lambda n, limit: limit),
            "cannot add",
        ),
        (
            "n as an int",
            _reserve(_ACTIVE_ROOM, lambda n, limit: limit - n, n_wire=lambda n: n),
            "wire form",
        ),
        (
            "the number unquoted",
            _reserve(_ACTIVE_ROOM, lambda n, limit: limit - n, n_wire=lambda n: {"N": n}),
            "wire form",
        ),
        (
            "the limit as the room",
            _reserve(_ACTIVE_ROOM, lambda n, limit: limit),
            "passes the limit",
        ),
        ("one short", _reserve(_ACTIVE_ROOM, lambda n, limit: limit - n - 1), "was refused"),
        ("the table's name", lambda n, limit: {"TableName": "t", **reserve(n, limit)}, "leave out"),
        (
            "a plain string",
            lambda n, limit: "SET messageCount = messageCount + 1",
            "as a dict, not str",
        ),
        ("an exception", _raise(ZeroDivisionError("division by zero")), "raised ZeroDivisionError"),
    ],
    "page_once": [
        ("no condition", page_once, "a second page replaced"),
        ("free keys only", _page_once("attribute_not_exists(pk)", {}, None), "was not replaced"),
        (
            "ttl before now, strictly",
            _page_once(
                "attribute_not_exists(pk) OR #ttl < :now",
                {"#ttl": "ttl"},
                lambda now: {"N": str(now)},
            ),
            "was not replaced",
        ),
        (
            "now as an int",
            _page_once(
                "attribute_not_exists(pk) OR #ttl <= :now", {"#ttl": "ttl"}, lambda now: now
            ),
            "wire form",
        ),
        ("a plain string", lambda now_s: "attribute_not_exists(pk)", "as a dict"),
        ("an exception", _raise(TypeError("bad")), "raised TypeError"),
    ],
    "record_once": [
        ("the time in the key", record_once, "landed beside the first record"),
        ("no condition", _record(_BY_ID, ""), "was accepted"),
        (
            "the input in the key",
            _record(lambda c, f, n: f"tool#{f}#{c}", absent("pk")),
            "was accepted",
        ),
        ("the id left out", _record(lambda c, f, n: "tool#", absent("pk")), "was refused"),
        ("the key alone", lambda c, f, n: f"tool#{c}", "return two things"),
        ("no condition value", _record(_BY_ID, None), "as its condition"),
        (
            "a placeholder in a string",
            _record(_BY_ID, "attribute_not_exists(#pk)"),
            "carries no #names",
        ),
        ("exists instead of absent", _record(_BY_ID, exists("pk")), "refused on an empty table"),
        ("an exception", _raise(RuntimeError("boom")), "raised RuntimeError"),
    ],
    "guard": [
        ("refuse what you thought of", guard_stub, "moves the table forbids were written"),
        (
            "a plain string that lets all in",
            lambda to: "attribute_exists(pk)",
            "moves the table forbids were written",
        ),
        ("a value in a string", lambda to: "status IN ('closing')", "no value written"),
        (
            "refuse every existing item",
            lambda to: "attribute_not_exists(pk)",
            "moves the table allows were refused",
        ),
        ("the targets, not the sources", lambda to: status_in(*TRANSITIONS[to]), "moves the table"),
        (
            "the status it has as well",
            lambda to: status_in(*sources(to), to),
            "moves the table forbids were written",
        ),
        ("a list of statuses", lambda to: list(sources(to)), "as its condition"),
        ("nothing", lambda to: None, "as its condition"),
        ("an exception", _raise(LookupError("no such status")), "raised LookupError"),
    ],
}


def _wrong_answers() -> list[Any]:
    by_name = {exercise.name: (module, exercise) for module, exercise in _exercises()}
    return [
        pytest.param(*by_name[name], answer, fragment, id=f"{name}: {what}")
        for name, answers in WRONG.items()
        for what, answer, fragment in answers
    ]


def test_every_exercise_has_wrong_answers() -> None:
    assert {exercise.name for _, exercise in _exercises()} <= set(WRONG)


@pytest.mark.parametrize(("module", "exercise", "answer", "fragment"), _wrong_answers())
def test_a_wrong_answer_is_told_its_mistake_briefly(
    module: Any,
    exercise: Exercise,
    answer: Any,
    fragment: str,
    client: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    context = module.context(client) if hasattr(module, "context") else (client,)
    exercise.check(answer, *context)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert out.startswith("Not yet: "), out
    assert fragment in " ".join(out.split()), out
    assert len(lines) <= MAX_LINES, out
    assert max(len(line) for line in lines) <= WIDTH, out
    assert "Traceback" not in out


@pytest.mark.parametrize(
    "condition",
    [absent("pk"), "attribute_not_exists(pk)"],
    ids=["a condition value", "a plain string"],
)
def test_04_and_05_take_the_same_forms_of_condition(condition: Any, client: Any) -> None:
    """A form one accepts the other accepts too: judged on what it does, not refused as a type."""
    record = RECORD_ONCE.verdict(_record(_BY_ID, condition), client)
    guard = GUARD.verdict(lambda to: condition, client)
    assert record.startswith("Correct: "), record
    assert "moves the table allows were refused" in guard, guard


def test_a_race_that_does_not_end_is_a_verdict_not_a_wait(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reservation checker's racing threads are waited for a bounded time: an answer that
    hangs in the race gets a verdict, not a notebook cell that never ends."""
    from sessionstore.tutorial import context_pages

    monkeypatch.setattr(context_pages, "JOIN_S", 0.5)

    def slow_in_the_race(n: int, limit: int) -> Any:
        if limit == 10_000:  # the race's appends
            time.sleep(2)
        return context_pages.reserve_solution(n, limit)

    verdict = context_pages.RESERVE.verdict(slow_in_the_race, client)
    assert verdict.startswith("Not yet: ") and "did not end in 0.5 s" in verdict
