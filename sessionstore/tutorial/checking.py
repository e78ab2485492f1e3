"""Exercises of the core notebooks (01-05), each with a checker that runs the learner's answer
against the engine the notebook uses and says what is wrong.

Layer: beside the tutorial set-up (``sessionstore.tutorial``), over the public package; nothing
of the store depends on it. Why here and not in the notebooks: a checker is code, tested like
code -- CI runs every checker on its exercise's unsolved ``stub`` (it must fail), on its
``solution`` (it must pass) and on a list of wrong answers a learner is likely to write (each
must be told its mistake), and checks that the notebook shows exactly that stub and solution.

One module per notebook, named like it (``optimistic_locking`` for 02). Each exercise is an
``Exercise``: its stub, its solution, and its checker. A notebook cell shows the stub's source for
the learner to edit, then ``EXERCISE.check(answer, ...)`` prints ``Correct: ...`` or ``Not yet:
...``; the solution cell (hidden by default) does the same with the solution.

A checker judges by the items before and after, never by "no exception", and whatever the answer
does -- raise, return the wrong type, send a request DynamoDB or botocore refuses -- ends as a
short ``Not yet`` with a hint (the helpers below), never as a traceback.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError, ParamValidationError

from .. import schema
from ..conditions import PLACEHOLDER, Condition, Request
from . import drop_table

__all__ = [
    "EXPRESSION_HINT",
    "QUOTE",
    "WIDTH",
    "WIRE_HINT",
    "Exercise",
    "NotYet",
    "call",
    "condition_params",
    "landed",
    "own_table",
    "quote",
    "refusal",
]

#: The width of a verdict, as a notebook's output shows it.
WIDTH = 88
#: How much of an error's own text a verdict quotes.
QUOTE = 150


class NotYet(Exception):
    """What a checker raises when the answer is wrong: the message says what and why."""


@dataclass(frozen=True)
class Exercise:
    """``check(answer, *context)`` raises ``NotYet`` or returns what the answer got right."""

    name: str
    stub: Callable[..., Any]
    solution: Callable[..., Any]
    checker: Callable[..., str]

    def check(self, answer: Callable[..., Any], *context: Any) -> None:
        """Run the checker on ``answer`` and print its verdict, wrapped to fit a cell's output."""
        print(textwrap.fill(self.verdict(answer, *context), WIDTH, break_on_hyphens=False))

    def verdict(self, answer: Callable[..., Any], *context: Any) -> str:
        """``Correct: ...`` or ``Not yet: ...``."""
        try:
            return f"Correct: {self.checker(answer, *context)}"
        except NotYet as exc:
            return f"Not yet: {exc}"
        except Exception as exc:  # the last net: what no helper below turned into a hint
            return f"Not yet: the check stopped on {quote(exc)}."


def quote(exc: BaseException) -> str:
    """``Type: message`` on one line, cut to ``QUOTE`` characters."""
    text = _cut(" ".join(str(exc).split()))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


#: The hint for a value botocore refuses: DynamoDB's wire form names each value's type.
WIRE_HINT = (
    "Hint: every value travels in DynamoDB's wire form, a dict naming its type -- "
    "{'S': 'text'}, {'N': '2'} (a number as a string), {'L': [...]}."
)
#: The hint for an expression DynamoDB cannot run.
EXPRESSION_HINT = (
    "Hint: each #name and :value an expression uses must be defined in "
    "ExpressionAttributeNames / ExpressionAttributeValues, each one defined must be used, "
    "and a value is never written into the expression itself."
)


def refusal(exc: Exception, what: str) -> NotYet:
    """What to tell a learner whose request (``what``: "Alice's request", "the Query") was
    refused before any condition ran: by botocore's parameter check, by DynamoDB's (or the
    engine's) validation, or by anything else."""
    if isinstance(exc, ParamValidationError):
        detail = " ".join(str(exc).split()).removeprefix("Parameter validation failed: ")
        return NotYet(f"botocore refused {what} before sending it: {_cut(detail)}. " + WIRE_HINT)
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        message = " ".join(str(error.get("Message", "")).split())
        if code == "ValidationException":
            return NotYet(f"DynamoDB refused {what}: {_cut(message)}. " + EXPRESSION_HINT)
        if code.startswith("5") or code in {"InternalServerError", "InternalFailure"}:
            # An engine that fails on an expression it cannot parse (stock moto answers 500).
            return NotYet(f"the engine could not run {what} (HTTP {code}). " + EXPRESSION_HINT)
        return NotYet(f"DynamoDB refused {what}: {code}: {_cut(message)}.")
    return NotYet(f"{what} failed: {quote(exc)}.")


@contextmanager
def own_table(client: Any, name: str) -> Iterator[str]:
    """A table of the checker's own on the notebook's engine: made afresh (so every check sees
    the same items), dropped when the check ends."""
    drop_table(client, name)
    schema.create_table(client, name)
    try:
        yield name
    finally:
        drop_table(client, name)


def landed(send: Callable[[], object], what: str) -> bool:
    """``send()`` a request: True if it landed, False if its condition refused it; refused for
    any other reason (``what``: "the PutItem"), a ``NotYet`` that says why (``refusal``)."""
    try:
        send()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            return False
        raise refusal(exc, what) from None
    except ParamValidationError as exc:
        raise refusal(exc, what) from None
    return True


def _cut(text: str) -> str:
    return text if len(text) <= QUOTE else text[: QUOTE - 3].rstrip() + "..."


def call(answer: Callable[..., Any], *args: Any, who: str = "your answer") -> Any:
    """``answer(*args)``, with anything it raises turned into a ``NotYet`` that quotes it."""
    try:
        return answer(*args)
    except NotYet:
        raise
    except Exception as exc:
        raise NotYet(
            f"{who} raised {quote(exc)}. Return what the exercise asks for and let the "
            "checker send it: the engine's answer is the test."
        ) from None


def condition_params(condition: object, who: str, r: Request | None = None) -> dict[str, Any]:
    """A condition as a request's parameters, with those already minted in ``r`` (the rest of
    the request's placeholders). The forms an answer may take, in every exercise that asks for
    a condition: a condition value (``sessionstore.conditions``), or a plain expression string
    without placeholders."""
    r = r or Request()
    if isinstance(condition, Condition):
        text = condition.render(r)
        return {"ConditionExpression": text, **r.params()} if text else r.params()
    if not isinstance(condition, str):
        raise NotYet(
            f"{who} returned {_cut(repr(condition))} ({type(condition).__name__}) as its "
            "condition. Hint: return a condition value (absent('pk'), status_in(...), "
            "clauses joined with & | ~) or a plain expression string."
        )
    if PLACEHOLDER.search(condition) or "'" in condition or '"' in condition:
        raise NotYet(
            f"{who} returned the string {_cut(repr(condition))}: a string carries no "
            "#names or :values, and DynamoDB takes no value written into an expression. "
            "Hint: write it as a condition value (absent('pk'), status_in(...)), whose "
            "placeholders the checker sends."
        )
    if not condition.strip():
        return r.params()
    return {"ConditionExpression": condition, **r.params()}
