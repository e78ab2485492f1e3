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
import math
from typing import Any, TypeAlias

from .errors import InvalidInput

JSON: TypeAlias = Any  # None | bool | int | float | str | list[JSON] | dict[str, JSON]

#: Deeper values are refused: Python's own JSON decoder recurses and would fail to read them back.
MAX_DEPTH = 256


def _check(value: object, what: str) -> None:
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidInput(f"{what} nests deeper than {MAX_DEPTH} levels")
        if item is None or isinstance(item, bool | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidInput(f"{what} holds {item!r}, which JSON cannot represent")
        elif isinstance(item, str):
            _check_text(item, what)
        elif type(item) is list:
            stack.extend((child, depth + 1) for child in item)
        elif type(item) is dict:
            for key, child in item.items():
                if not isinstance(key, str):
                    raise InvalidInput(f"{what} has a non-string object key {key!r}")
                _check_text(key, what)
                stack.append((child, depth + 1))
        else:
            raise InvalidInput(f"{what} holds a {type(item).__name__}, which is not a JSON value")


def _check_text(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} holds a string that is not valid Unicode") from exc


def encode(value: JSON, what: str = "value") -> str:
    """Exact JSON text of ``value``; raises ``InvalidInput`` for anything JSON can't hold."""
    _check(value, what)
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError) as exc:  # e.g. an int past 4300 digits
        raise InvalidInput(f"{what} cannot be written as JSON: {exc}") from exc


def decode(text: str) -> JSON:
    return json.loads(text)


def fingerprint(name_text: str, *values: JSON) -> str:
    """Digest of a tool name (already encoded) and payloads that ``encode`` accepted: key order
    ignored, number spelling kept (``1`` and ``1.0`` differ)."""
    h = hashlib.sha256(name_text.encode("utf-8"))
    for value in values:
        h.update(b"\x00")
        canonical = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        h.update(canonical.encode("utf-8"))
    return h.hexdigest()
