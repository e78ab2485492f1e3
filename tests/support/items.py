"""Stored items read as they are (wire form), around the store: what the tests check against."""

from __future__ import annotations

from typing import Any

from sessionstore import schema


def stored(client: Any, table: str, session_id: str, sk: str = schema.META_SK) -> dict[str, Any]:
    """The item ``sk`` of the session, strongly consistent (``KeyError`` if it is absent)."""
    key = {"pk": {"S": schema.pk(session_id)}, "sk": {"S": sk}}
    item: dict[str, Any] = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
    return item
