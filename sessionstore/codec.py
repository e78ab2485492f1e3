"""JSON payloads (tool input/output, context messages) stored as canonical JSON text.

Why text and not DynamoDB maps: a native map cannot round-trip a JSON value exactly. Numbers lose
the difference between ``1`` and ``1.0``, integers past 38 digits are refused, nesting stops at 32
levels, and boto3 refuses ``float`` outright. A string attribute keeps every value exactly, has a
size we can compute to the byte, and compares cheaply when a retried tool call must be checked
against the stored one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import partial

from .errors import InvalidInput
from .models import JSON as JSON  # the type, and its reader, are the models' (the bottom layer)
from .models import decode as decode

__all__ = ["JSON", "decode", "encode", "fingerprint"]

#: Deeper values are refused: Python's own JSON decoder recurses and would fail to read them back.
MAX_DEPTH = 256

_SCALARS = frozenset({str, int, float, bool, type(None)})


def validate(value: object, what: str = "value", depth: int = 0) -> None:
    """Raise ``InvalidInput`` unless ``encode`` could hold ``value``: only JSON types (``list``,
    ``dict`` with ``str`` keys: ``json.dumps`` would take tuples and turn int keys into text), at
    most ``MAX_DEPTH`` levels. Floats and text are checked when it is encoded (``encode``)."""
    kind = type(value)
    if kind in _SCALARS:
        return
    if depth >= MAX_DEPTH and (kind is list or kind is dict) and value:
        raise InvalidInput(f"{what} nests deeper than {MAX_DEPTH} levels")
    if kind is list:
        for child in value:  # type: ignore[attr-defined]
            if type(child) not in _SCALARS:
                validate(child, what, depth + 1)
    elif kind is dict:
        for key, child in value.items():  # type: ignore[attr-defined]
            if type(key) is not str:
                raise InvalidInput(f"{what} has a non-string object key {key!r}")
            if type(child) not in _SCALARS:
                validate(child, what, depth + 1)
    elif isinstance(value, str | int | float):  # subclasses (IntEnum, str enums): as JSON does
        return
    else:
        raise InvalidInput(f"{what} holds a {kind.__name__}, which is not a JSON value")


_EXACT = partial(json.dumps, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_CANONICAL = partial(_EXACT, sort_keys=True)


def encode(value: JSON, what: str = "value") -> str:
    """Exact JSON text of ``value``; raises ``InvalidInput`` for anything JSON can't hold."""
    return _written(_EXACT, value, what)


def _written(dumps: Callable[[object], str], value: JSON, what: str) -> str:
    """``dumps(value)``, refused (``InvalidInput``) wherever JSON text cannot hold ``value``."""
    validate(value, what)
    try:
        text = dumps(value)
    except (ValueError, TypeError, RecursionError) as exc:  # NaN, Infinity, an int past 4300 digits
        raise InvalidInput(f"{what} cannot be written as JSON: {exc}") from exc
    if not text.isascii():  # ASCII text holds no surrogate
        try:
            text.encode("utf-8")  # a lone surrogate, in a string or a key
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"{what} holds a string that is not valid Unicode") from exc
    return text


def kept(value: JSON, what: str = "value") -> str:
    """``encode(value)``, or where JSON cannot hold it (a tool's own NaN, a lone surrogate), a
    note of why, ``{"unrecordable": "..."}``: what a record keeps of a run that happened."""
    try:
        return encode(value, what)
    except InvalidInput as exc:
        why = str(exc).encode("ascii", "backslashreplace").decode()
        return encode({"unrecordable": why}, what)


def fingerprint(name_text: str, *values: JSON, what: str = "value") -> str:
    """Digest of a tool name (already encoded) and payloads: key order ignored, number spelling
    kept (``1`` and ``1.0`` differ). Refuses (``InvalidInput``) what ``encode`` refuses, so a
    fingerprint is never taken of what could not be written."""
    h = hashlib.sha256(name_text.encode("utf-8"))
    for value in values:
        h.update(b"\x00")
        h.update(_written(_CANONICAL, value, what).encode("utf-8"))
    return h.hexdigest()
