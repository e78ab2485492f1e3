"""The embedded engine reads a request's JSON along its input shape once, not member by member.

Layer: inside the embedded engine (``cache.install`` installs it), where moto turns a DynamoDB
request's body into the parameters its handler reads. Why: moto built the DynamoDB service
model again for every request, and its JSON parser walked every member of a structure's shape
for every structure in the request: an attribute value (one key on the wire, ``{"S": ...}``)
cost a look-up of each of its ten members, so a request cost the engine more with every value it
carried -- a transaction of the store's, with its maps of values, most of all. Here the service
model and each action's operation model are made once, and a structure with fewer keys on the
wire than members in its shape is read from its keys, then put in the shape's order: the
parameters are the ones moto's parser makes (same members, same order, same conversions: blobs
decoded, numbers, timestamps), which its own parser still makes for anything else -- another
protocol, or a body it fails on (and then raises what it raises).
"""

from __future__ import annotations

import weakref
from typing import Any

#: Per structure shape: its members in the shape's order, and by name on the wire:
#: ``(order, {wire name: (position, member name, member shape)})`` (as long as the shape lives).
_MEMBERS: weakref.WeakKeyDictionary[Any, tuple[list[Any], dict[str, tuple[int, str, Any]]]] = (
    weakref.WeakKeyDictionary()
)


def parser_class() -> Any:
    """moto's JSON request parser, reading sparse structures by their keys."""
    from moto.core.parse import JSONParser

    base: Any = JSONParser

    class SparseJSONParser(JSONParser):
        def _parse_structure(self, shape: Any, value: Any) -> Any:
            if shape.is_document_type or type(value) is not dict:
                return base._parse_structure(self, shape, value)
            found = _MEMBERS.get(shape)
            if found is None:
                found = _MEMBERS[shape] = _members(shape)
            order, by_wire = found
            if len(value) >= len(order):
                return base._parse_structure(self, shape, value)
            present = [(by_wire[k], v) for k, v in value.items() if v is not None and k in by_wire]
            if len(present) > 1:
                present.sort(key=lambda entry: entry[0][0])
            parsed = self.MAP_TYPE()
            parse: Any = self._parse_shape
            for (_, name, member), raw in present:
                parsed[name] = parse(member, raw)
            return parsed

    return SparseJSONParser


def _members(shape: Any) -> tuple[list[Any], dict[str, tuple[int, str, Any]]]:
    order = list(shape.members.items())
    by_wire = {
        member.serialization.get("name", name): (i, name, member)
        for i, (name, member) in enumerate(order)
    }
    return order, by_wire


def install() -> None:
    """Patch moto's DynamoDB handler in this process (once: ``cache.install``)."""
    from moto.core.request import determine_request_protocol
    from moto.core.utils import get_service_model
    from moto.dynamodb.responses import DynamoHandler

    parse_parameters = DynamoHandler.parse_parameters
    sparse = parser_class()
    models: dict[str, Any] = {}
    operations: dict[str, Any] = {}

    def parse_once(self: Any, request: Any) -> None:
        service = models.get(self.boto3_service_name)
        if service is None:
            service = models[self.boto3_service_name] = get_service_model(self.boto3_service_name)
        if determine_request_protocol(service, request.content_type) != "json":
            parse_parameters(self, request)
            return
        action = self._get_action()
        operation = operations.get(action)
        if operation is None:
            operation = operations[action] = service.operation_model(action)
        parser = sparse(operation, map_type=self.PROTOCOL_PARSER_MAP_TYPE)
        try:
            parsed = parser.parse(
                {
                    "method": request.method,
                    "values": request.values,
                    "headers": request.headers,
                    "body": request.data,
                    "url_path": request.path,
                    "url_params": self.uri_match,
                }
            )
        except Exception:  # moto's own parser decides, and raises what it raises
            parse_parameters(self, request)
            return
        self.params = parsed

    DynamoHandler.parse_parameters = parse_once  # type: ignore[method-assign]
