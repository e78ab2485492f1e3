"""The embedded engine reads a request's JSON along its input shape with readers made once.

Layer: inside the embedded engine (``cache.install`` installs it), where moto turns a DynamoDB
request's body into the parameters its handler reads. Why: moto's JSON parser walked a request
generically, looking each shape's handler up by name at every node, and walked every member of a
structure's shape for every structure in the request: an attribute value (one key on the wire,
``{"S": ...}``) cost a look-up of each of its ten members, so a request cost the engine more with
every value it carried -- a transaction of the store's, with its maps of values, most of all.
Here each action's input shape is turned once into a tree of readers, and a structure is read
from the keys on the wire, then put in the shape's order. The parameters are the ones moto's
parser makes (same members, same order, same conversions: blobs decoded, numbers, timestamps);
a value of a type its shape does not expect (where moto's parser does something of its own), or
another protocol, goes to moto's own parser, which then raises what it raises.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

Reader = Callable[[Any], Any]


class _Unexpected(Exception):
    """A value of a type its shape does not expect: moto's own parser reads the request."""


def _same(value: Any) -> Any:
    return value


def reader(shape: Any, made: dict[str, Reader] | None = None) -> Reader:
    """What moto's JSON parser does to a value of ``shape`` (its ``_parse_shape``), as a function
    made once; ``made``: the readers made so far, by shape name (shapes nest themselves)."""
    made = {} if made is None else made
    found = made.get(shape.name)
    if found is not None:
        return found
    kind = shape.type_name
    if kind == "structure" and not shape.is_document_type:
        return _structure(shape, made)
    if kind == "list":
        return _list(shape, made)
    if kind == "map":
        return _map(shape, made)
    return _SCALARS.get(kind, _same)


def _structure(shape: Any, made: dict[str, Reader]) -> Reader:
    members: dict[str, tuple[int, str, Reader]] = {}

    def read(value: Any) -> Any:
        if type(value) is not dict:
            raise _Unexpected
        present = [(members[k], v) for k, v in value.items() if v is not None and k in members]
        if len(present) > 1:
            present.sort(key=lambda entry: entry[0][0])
        return {name: read_member(v) for (_, name, read_member), v in present}

    made[shape.name] = read  # before its members: an attribute value holds attribute values
    for position, (name, member) in enumerate(shape.members.items()):
        members[member.serialization.get("name", name)] = (position, name, reader(member, made))
    return read


def _list(shape: Any, made: dict[str, Reader]) -> Reader:
    read_member = reader(shape.member, made)

    def read(value: Any) -> Any:
        if type(value) is not list:
            raise _Unexpected
        return [read_member(v) for v in value]

    return read


def _map(shape: Any, made: dict[str, Reader]) -> Reader:
    read_key, read_value = reader(shape.key, made), reader(shape.value, made)

    def read(value: Any) -> Any:
        if type(value) is not dict:
            raise _Unexpected
        return {read_key(k): read_value(v) for k, v in value.items()}

    return read


def _timestamp(value: Any) -> Any:
    from moto.core.parse import default_timestamp_parser

    return default_timestamp_parser(value)


_SCALARS: dict[str, Reader] = {
    "blob": base64.b64decode,  # moto's default_blob_parser
    "timestamp": _timestamp,
    "float": float,
    "double": float,
    "integer": int,
    "byte": int,
    "short": int,
    "long": int,
}


def install() -> None:
    """Patch moto's DynamoDB handler in this process (once: ``cache.install``)."""
    from moto.core.parse import JSONParser
    from moto.core.request import determine_request_protocol
    from moto.core.utils import get_service_model
    from moto.dynamodb.responses import DynamoHandler

    parse_parameters = DynamoHandler.parse_parameters
    readers: dict[str, tuple[Any, Reader]] = {}

    def read_once(self: Any, request: Any) -> None:
        service = get_service_model(self.boto3_service_name)  # cached by moto
        if (
            self.PROTOCOL_PARSER_MAP_TYPE is not dict
            or determine_request_protocol(service, request.content_type) != "json"
        ):
            parse_parameters(self, request)
            return
        action = self._get_action()
        found = readers.get(action)
        if found is None:
            operation = service.operation_model(action)
            shape = operation.input_shape
            found = readers[action] = (operation, reader(shape) if shape is not None else dict)
        operation, read = found
        parser: Any = JSONParser(operation, map_type=dict)
        body = parser._parse_body_as_json(request.data)
        try:
            self.params = read(body) if operation.input_shape is not None else {}
        except Exception:  # moto's own parser decides, and raises what it raises
            parse_parameters(self, request)

    DynamoHandler.parse_parameters = read_once  # type: ignore[method-assign]
