"""The embedded engine refuses a malformed request as DynamoDB does: 400 ``ValidationException``.

Layer: inside the embedded engine (``local.py`` installs it), in front of moto's DynamoDB actions.
Why: moto answers many malformed requests with an HTTP 500 -- an undefined ``:value`` or
``#name`` is a ``KeyError`` in its parser -- and botocore retries a 500 five times, so a notebook
cell filled with server tracebacks before the answer. DynamoDB validates a request whole before it
touches an item, so the checks here run first, in DynamoDB's order (the names and values maps, then
each expression: its syntax, then its placeholders; then what no expression used), with DynamoDB's
messages. AWS puts some of them in an envelope, ``1 validation error detected: ``, in some regions
and not others; the engine always does. Whatever else moto cannot handle in a DynamoDB action is
still the client's request: ``refuse_unexpected`` answers it 400 too, never 500.

Each expression's syntax is checked once per text (``_syntax``, bounded): the store sends the same
few texts again and again with other values.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from .refusals import refusal

#: The envelope AWS puts around most of these messages (in some regions).
ENVELOPE = "1 validation error detected: "
#: A placeholder in an expression: ``#name`` or ``:value`` (nothing else in it starts so).
_PLACEHOLDER = re.compile(r"[#:][0-9A-Za-z_]+")
_NAME_KEY = re.compile(r"#[0-9A-Za-z_]+")
_VALUE_KEY = re.compile(r":[0-9A-Za-z_]+")
#: A number DynamoDB takes as it is: an integer of at most 38 digits (most numbers on the wire).
_PLAIN_INTEGER = re.compile(r"-?[0-9]{1,38}")
_SYNTAX_CACHE = 2048

#: The expressions each action takes, in the order DynamoDB checks them.
FIELDS: dict[str, tuple[str, ...]] = {
    "PutItem": ("ConditionExpression",),
    "DeleteItem": ("ConditionExpression",),
    "ConditionCheck": ("ConditionExpression",),
    "UpdateItem": ("UpdateExpression", "ConditionExpression"),
    "GetItem": ("ProjectionExpression",),
    "Query": ("KeyConditionExpression", "FilterExpression", "ProjectionExpression"),
    "Scan": ("FilterExpression", "ProjectionExpression"),
}
#: A transaction's action -> the action whose checks it takes.
TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheck",
    "Get": "GetItem",
}


def check_request(action: str, body: Mapping[str, Any]) -> None:
    """Raise DynamoDB's ``ValidationException`` for a malformed ``action`` request (``body``:
    the request's JSON); return None for one moto may run. ``TransactWriteItems`` and
    ``TransactGetItems`` are checked action by action, whole, before any runs."""
    if action in ("TransactWriteItems", "TransactGetItems"):
        for entry in body.get("TransactItems") or ():
            if isinstance(entry, Mapping) and len(entry) == 1:
                kind, inner = next(iter(entry.items()))
                if kind in TRANSACT_ACTIONS and isinstance(inner, Mapping):
                    check_action(TRANSACT_ACTIONS[kind], inner)
        return
    if action in FIELDS:
        check_action(action, body)


def check_action(action: str, body: Mapping[str, Any]) -> None:
    """One item action's checks (a request, or an action of a transaction)."""
    fields = FIELDS[action]
    names = body.get("ExpressionAttributeNames")
    values = body.get("ExpressionAttributeValues")
    given = [f for f in fields if body.get(f) is not None]
    if names is not None and not given:
        raise refusal("ExpressionAttributeNames can only be specified when using expressions")
    takes_values = [f for f in fields if f != "ProjectionExpression"]
    if (
        values is not None
        and takes_values
        and not any(body.get(f) is not None for f in takes_values)
    ):
        null = "are null" if len(takes_values) > 1 else "is null"
        raise refusal(
            "ExpressionAttributeValues can only be specified when using expressions: "
            f"{' and '.join(takes_values)} {null}"
        )
    for name, value in (body.get("Key") or {}).items():
        _check_key_value(name, value)
    for value in (body.get("Item") or {}).values():
        problem = value_problem(value)
        if problem:
            raise refusal(problem)
    _check_maps(names, values)
    used: set[str] = set()
    for field in given:
        text = body[field]
        if not isinstance(text, str):
            continue  # moto's request parser refuses it
        if not text.strip():
            raise refusal(f"{ENVELOPE}Invalid {field}: The expression can not be empty;")
        problem = _syntax(field, text)
        if problem:
            raise refusal(problem)
        found = placeholders(text)
        for token in found:
            if token[0] == "#" and token not in (names or {}):
                raise refusal(
                    f"{ENVELOPE}Invalid {field}: An expression attribute name used in the "
                    f"document path is not defined; attribute name: {token}"
                )
        for token in found:
            if token[0] == ":" and token not in (values or {}):
                raise refusal(
                    f"{ENVELOPE}Invalid {field}: An expression attribute value used in "
                    f"expression is not defined; attribute value: {token}"
                )
        used.update(found)
    for label, given_map in (("Names", names), ("Values", values)):
        unused = [key for key in given_map or () if key not in used]
        if unused:
            raise refusal(
                f"{ENVELOPE}Value provided in ExpressionAttribute{label} unused in expressions: "
                f"keys: {{{', '.join(unused)}}}"
            )


def _check_maps(names: Any, values: Any) -> None:
    if names is not None:
        if not names:
            raise refusal("ExpressionAttributeNames must not be empty")
        for key in names:
            if not _NAME_KEY.fullmatch(str(key)):
                raise refusal(
                    f'ExpressionAttributeNames contains invalid key: Syntax error; key: "{key}"'
                )
    if values is not None:
        if not values:
            raise refusal("ExpressionAttributeValues must not be empty")
        for key in values:
            if not _VALUE_KEY.fullmatch(str(key)):
                raise refusal(
                    f'ExpressionAttributeValues contains invalid key: Syntax error; key: "{key}"'
                )
        for key, value in values.items():
            problem = value_problem(value)
            if problem:
                raise refusal(
                    f"ExpressionAttributeValues contains invalid value: {problem} for key {key}"
                )


def _check_key_value(name: str, value: Any) -> None:
    if isinstance(value, Mapping) and len(value) == 1:
        kind, data = next(iter(value.items()))
        if kind in ("S", "B") and data in ("", b""):
            what = "string" if kind == "S" else "binary"
            raise refusal(
                "One or more parameter values are not valid. The AttributeValue for a key "
                f"attribute cannot contain an empty {what} value. Key: {name}"
            )
    problem = value_problem(value)
    if problem:
        raise refusal(problem)


_SET_NAMES = {"SS": "string", "NS": "number", "BS": "binary"}


def value_problem(value: Any) -> str | None:
    """What DynamoDB says of an attribute value on the wire it refuses, or None."""
    if not isinstance(value, Mapping) or not value:
        return (
            "Supplied AttributeValue is empty, must contain exactly one of the supported datatypes"
        )
    if len(value) > 1:
        return (
            "Supplied AttributeValue has more than one datatypes set, must contain exactly one "
            "of the supported datatypes"
        )
    kind, data = next(iter(value.items()))
    if kind == "S":
        return None
    if kind == "N":
        return _number_problem(data)
    if kind in _SET_NAMES:
        if not isinstance(data, list) or not data:
            return (
                "One or more parameter values were invalid: "
                f"An {_SET_NAMES[kind]} set  may not be empty"
            )
        if kind == "NS":
            for number in data:
                problem = _number_problem(number)
                if problem:
                    return problem
            if len({Decimal(n) for n in data}) < len(data):
                return "Input collection contains duplicates"
        elif len({json.dumps(x) if not isinstance(x, bytes) else x for x in data}) < len(data):
            shown = ", ".join(str(x) for x in data)
            return (
                f"One or more parameter values were invalid: Input collection [{shown}] "
                "contains duplicates."
            )
    if kind == "L" and isinstance(data, list):
        return next(filter(None, map(value_problem, data)), None)
    if kind == "M" and isinstance(data, Mapping):
        return next(filter(None, map(value_problem, data.values())), None)
    return None


def _number_problem(text: Any) -> str | None:
    if type(text) is str and _PLAIN_INTEGER.fullmatch(text):
        return None  # finite, at most 38 digits, magnitude under 10**38: nothing to refuse
    try:
        number = Decimal(str(text))
    except InvalidOperation:
        return f"The parameter cannot be converted to a numeric value: {text}"
    if not number.is_finite():
        return f"The parameter cannot be converted to a numeric value: {text}"
    if number == 0:
        return None
    # as written, not ``normalize()``d: that rounds to the context's 28 digits, so 39 passed
    digits = number.as_tuple().digits
    significant = len(_without_trailing_zeros(digits))  # a Decimal has no leading zeros
    exponent = number.adjusted()
    if exponent > 125:
        return (
            "Number overflow. Attempting to store a number with magnitude larger than "
            "supported range"
        )
    if exponent < -130:
        return (
            "Number underflow. Attempting to store a number with magnitude smaller than "
            "supported range"
        )
    if significant > 38:
        return "Attempting to store more than 38 significant digits in a Number"
    return None


def _without_trailing_zeros(digits: tuple[int, ...]) -> tuple[int, ...]:
    end = len(digits)
    while end and digits[end - 1] == 0:
        end -= 1
    return digits[:end]


@functools.lru_cache(maxsize=_SYNTAX_CACHE)
def placeholders(text: str) -> tuple[str, ...]:
    """The placeholders of ``text``, each once, in order of first use."""
    return tuple(dict.fromkeys(_PLACEHOLDER.findall(text)))


@functools.lru_cache(maxsize=_SYNTAX_CACHE)
def _syntax(field: str, text: str) -> str | None:
    """What DynamoDB says of ``text``'s syntax (reserved words and function names included), or
    None: moto's parsers, with every placeholder defined (their own checks come next)."""
    from moto.dynamodb.comparisons import create_condition_expression_parser
    from moto.dynamodb.exceptions import MockValidationException
    from moto.dynamodb.parsing.expressions import (  # type: ignore[attr-defined]
        UpdateExpressionParser,
    )

    if field == "ProjectionExpression":
        return None  # moto's projection parser reports its own errors; anything else: the net
    try:
        if field == "UpdateExpression":
            UpdateExpressionParser.make(text)
        else:
            found = placeholders(text)
            names = {t: t[1:] for t in found if t[0] == "#"}
            values = {t: {"S": t} for t in found if t[0] == ":"}
            create_condition_expression_parser(text, names, values).parse()
    except MockValidationException as exc:
        message = str(exc.exception_msg)
        return message.replace("Invalid ConditionExpression", f"Invalid {field}", 1)
    except Exception as exc:  # moto's condition parser: a ValueError naming what it saw
        return f"Invalid {field}: Syntax error; {exc}"
    return None


def unexpected_refusal(action: str, exc: BaseException) -> str:
    """The message of the 400 for an error moto did not expect while running ``action``."""
    return (
        f"One or more parameter values were invalid: the embedded engine could not process this "
        f"{action} request ({type(exc).__name__}: {exc})"
    )


#: DynamoDB's codes for a transaction's cancellation reasons; anything else moto reports (the
#: name of an exception it did not expect) is the request's own fault: ``ValidationError``.
CANCELLATION_CODES = frozenset(
    {
        "None",
        "ConditionalCheckFailed",
        "ItemCollectionSizeLimitExceeded",
        "TransactionConflict",
        "ProvisionedThroughputExceeded",
        "ThrottlingError",
        "ValidationError",
    }
)


def reason_codes(errors: list[Any]) -> Iterator[tuple[Any, Any, Any]]:
    """moto's cancellation reasons with DynamoDB's codes."""
    for code, message, item in errors:
        if code is not None and code not in CANCELLATION_CODES:
            yield "ValidationError", message, item
        else:
            yield code, message, item


#: DynamoDB's action -> moto's method of ``DynamoHandler`` for it.
_METHODS = {
    "PutItem": "put_item",
    "DeleteItem": "delete_item",
    "UpdateItem": "update_item",
    "GetItem": "get_item",
    "Query": "query",
    "Scan": "scan",
    "TransactWriteItems": "transact_write_items",
    "TransactGetItems": "transact_get_items",
}


def install() -> None:
    """Patch moto's DynamoDB in this process (once: ``local.answer_like_dynamodb``)."""
    from moto.dynamodb import exceptions
    from moto.dynamodb.responses import DynamoHandler
    from werkzeug.exceptions import HTTPException

    from . import keys as engine_keys

    for action, method_name in _METHODS.items():
        method = getattr(DynamoHandler, method_name)

        def checked(self: Any, _action: str = action, _method: Any = method) -> Any:
            check_request(_action, self.body)
            if _action == "TransactWriteItems":
                engine_keys.check_transaction_keys(self.dynamodb_backend, self.body)
            elif _action == "Query":
                engine_keys.check_query_key_types(self.dynamodb_backend, self.body)
            try:
                return _method(self)
            except exceptions.MockValidationException as exc:
                if exc.exception_msg != "Validation Exception":
                    raise
                raise refusal(
                    engine_keys.KEY_MISMATCH
                ) from None  # moto's word for a key not the table's

        setattr(DynamoHandler, method_name, functools.wraps(method)(checked))

    cancelled: Any = exceptions.TransactionCanceledException
    cancel_init = cancelled.__init__

    def init(self: Any, errors: list[Any]) -> None:
        cancel_init(self, list(reason_codes(errors)))

    cancelled.__init__ = init

    call_action = DynamoHandler.call_action

    def refuse_unexpected(self: Any) -> Any:
        try:
            return call_action(self)
        except HTTPException:
            raise
        except Exception as exc:  # a request moto cannot handle is still the client's: 400
            try:
                action = str(self._get_action())
            except Exception:
                action = "DynamoDB"
            error: Any = refusal(unexpected_refusal(action, exc))
            headers = {**dict(error.get_headers()), "status": str(error.code)}
            return error.code, headers, error.description

    DynamoHandler.call_action = refuse_unexpected  # type: ignore[method-assign]
