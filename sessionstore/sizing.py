"""DynamoDB's item-size and capacity rules, computed -- moto reports a flat 1 WCU / 0.5 RCU.

Rules (AWS developer guide, "DynamoDB item sizes and formats"):

* an item is the sum of its attribute names (UTF-8 bytes) and values;
* String: UTF-8 bytes; Binary: raw bytes; Null and Boolean: 1 byte;
* Number: 1 byte per two significant digits (leading and trailing zeros trimmed) + 1 byte;
* List and Map: 3 bytes + their elements, and 1 byte per element; map keys count as names;
* Sets: the sum of their elements.

Write units: 1 per started KB (1,024 B) of the larger of the old and new item; transactional
writes cost 2 per KB. Read units: 1 per started 4 KB (4,096 B) strongly consistent, half that
eventually consistent; a Query rounds the *sum* of the items it returns.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

__all__ = [
    "MAX_ITEM_BYTES",
    "READ_UNIT_BYTES",
    "WRITE_UNIT_BYTES",
    "item_size",
    "query_read_units",
    "read_units",
    "text_size",
    "write_units",
]

MAX_ITEM_BYTES = 409_600
WRITE_UNIT_BYTES = 1_024
READ_UNIT_BYTES = 4_096

AttributeValue = Mapping[str, Any]


def number_size(text: str | int | Decimal) -> int:
    if type(text) is str and text.isdigit() and text.isascii():
        # A plain non-negative integer -- every number the store writes: no Decimal needed.
        significant = text.strip("0")
    else:
        digits = str(Decimal(str(text)).copy_abs()).lower()
        mantissa = digits.split("e")[0].replace(".", "")
        significant = mantissa.strip("0")
    return math.ceil(max(len(significant), 1) / 2) + 1


def text_size(text: str) -> int:
    """UTF-8 bytes of ``text``; ASCII (known to CPython without a scan) needs no encoding."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def value_size(value: AttributeValue) -> int:
    """Size of one low-level attribute value such as ``{"S": "x"}`` (name not included)."""
    ((kind, data),) = value.items()
    if kind == "S":
        return text_size(data)
    if kind == "N":
        return number_size(data)
    if kind == "B":
        return len(_raw(data))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in data)
    if kind == "M":
        return 3 + sum(text_size(k) + value_size(v) + 1 for k, v in data.items())
    if kind == "SS":
        return sum(len(s.encode("utf-8")) for s in data)
    if kind == "NS":
        return sum(number_size(n) for n in data)
    if kind == "BS":
        return sum(len(_raw(b)) for b in data)
    raise ValueError(f"unknown attribute type {kind!r}")


def _raw(data: bytes | str) -> bytes:
    return data if isinstance(data, bytes) else base64.b64decode(data)


def item_size(item: Mapping[str, AttributeValue]) -> int:
    """Size in bytes of a low-level item (``{"pk": {"S": ...}, ...}``) as DynamoDB counts it."""
    return sum(text_size(name) + value_size(v) for name, v in item.items())


def write_units(size: int, *, transactional: bool = False) -> int:
    units = max(1, math.ceil(size / WRITE_UNIT_BYTES))
    return units * 2 if transactional else units


def read_units(size: int, *, consistent: bool = True) -> float:
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


def query_read_units(sizes: Iterable[int], *, consistent: bool = True) -> float:
    """A Query is billed on the summed size of what it returns, rounded up once."""
    return read_units(sum(sizes), consistent=consistent)
