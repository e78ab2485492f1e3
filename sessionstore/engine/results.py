"""The embedded engine writes an item action's result to JSON itself, along its output shape.

Layer: inside the embedded engine (``cache.install`` installs it), where moto turns a
DynamoDB action's result into the HTTP body. Why: moto's model-driven serializer looked every
member of the output shape up under each of its aliases (snake case, capitalised...): most of
the engine's time for a GetItem, and a large share of any request returning an item. The item
actions' results are plain dicts already shaped like DynamoDB's JSON, so they are written straight
out, member by member of the shape as moto's serializer would (unknown keys and ``None`` left
out, blobs in base64, numbers as the shape says); a value of any other kind, an error or another
action goes through moto's serializer as before. The copy moto makes of a result first
(``dynamo_to_dict``) copies plain values without asking each whether it is a model object.
"""

from __future__ import annotations

import base64
import json
from typing import Any

#: The item actions whose results moto builds as plain wire-shaped dicts: written straight to
#: JSON along their output shape, not through moto's model-driven serializer (which looked every
#: member up under each of its aliases: most of the engine's time for a GetItem).
_DIRECT = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "Query",
        "Scan",
        "BatchGetItem",
        "BatchWriteItem",
        "TransactGetItems",
        "TransactWriteItems",
    }
)


_CONTENT_TYPE = "application/x-amz-json-1.0"  # DynamoDB's protocol: JSON 1.0


class _Unusual(Exception):
    """A value the direct writer does not handle the way moto's serializer would: use that."""


def _wire(value: Any, shape: Any) -> Any:
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            raise _Unusual
        members = shape.members
        out = {}
        for key, item in value.items():
            member = members.get(key)
            if member is not None and item is not None:
                out[key] = _wire(item, member)
        return out
    if kind == "map":
        if not isinstance(value, dict):
            raise _Unusual
        return {key: _wire(item, shape.value) for key, item in value.items()}
    if kind == "list":
        if not isinstance(value, list | tuple):
            raise _Unusual
        return [_wire(item, shape.member) for item in value]
    if kind == "string":
        if not isinstance(value, str):
            raise _Unusual
        return value
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind in ("integer", "long") and isinstance(value, int | float):
        return int(value)
    if kind in ("float", "double") and isinstance(value, int | float):
        return float(value)
    if kind == "blob":
        raw = value.encode("utf-8") if isinstance(value, str) else value
        if not isinstance(raw, bytes):
            raise _Unusual
        return base64.b64encode(raw).strip().decode("utf-8")
    raise _Unusual


def plain(convert: Any) -> Any:
    """moto's ``dynamo_to_dict`` (``convert``), with plain JSON values (dicts, lists, text,
    numbers) copied as it copies them, without its checks for model objects at every node."""

    def to_dict(value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            return {key: to_dict(item) for key, item in value.items()}
        if kind is list:
            return [to_dict(item) for item in value]
        if kind in _SCALARS or value is None:
            return value
        return convert(value)  # a model object, a dict or list of another class...: moto's way

    return to_dict


_SCALARS = frozenset({str, int, float, bool})


def install() -> None:
    """Patch moto's DynamoDB handler in this process (once: ``local``)."""
    from moto.core.responses import ActionResult
    from moto.core.utils import get_service_model
    from moto.dynamodb import responses
    from moto.dynamodb.responses import DynamoHandler, DynamoResult

    # DynamoResult copies every result through it: an item's plain dicts, node by node.
    responses.dynamo_to_dict = plain(responses.dynamo_to_dict)  # type: ignore[attr-defined]

    serialized = DynamoHandler.serialized

    def direct(self: Any, action_result: Any) -> Any:
        result = action_result.result
        action = self._get_action()
        if (
            action not in _DIRECT
            or type(action_result) not in (ActionResult, DynamoResult)
            or not isinstance(result, dict)
        ):
            return serialized(self, action_result)
        # Each step cached already: the model by moto, the operation and its shape by botocore.
        shape = get_service_model(self.boto3_service_name).operation_model(action).output_shape
        try:
            body = json.dumps(_wire(result, shape))
        except (_Unusual, TypeError, ValueError):
            return serialized(self, action_result)
        headers = {"Content-Type": _CONTENT_TYPE, **self.response_headers}
        return 200, headers, body

    DynamoHandler.serialized = direct  # type: ignore[method-assign]
