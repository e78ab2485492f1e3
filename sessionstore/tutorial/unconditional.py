"""WRONG ON PURPOSE: FastMCP's session state over an unconditional-put DynamoDB store.

Layer: teaching and comparison code (tests, ``benchmarks.fastmcp``, notebook 09), never the
package's behaviour. Why it exists: it is what py-key-value's ``DynamoDBStore`` does (one item
per key, ``PutItem`` with no condition, ``GetItem`` without ``ConsistentRead``), so FastMCP's own
read-modify-write of a session's whole dict runs over it exactly as it runs in production --
and loses concurrent ``set``\\ s, lets ``end`` race a ``set`` back to life, and leaves orphans.
That store itself cannot be installed beside the pinned botocore (its aiobotocore pins an older
one), so this is the same behaviour in a few lines, on the same table and engine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import anyio.to_thread

__all__ = ["KV_PREFIX", "UnconditionalPutStore"]

KV_PREFIX = "kv#"  # partitions of this store in the shared table: ``kv#<collection>#<key>``


class UnconditionalPutStore:
    """An ``AsyncKeyValue`` on a boto3 DynamoDB client: last *whole value* wins (wrong way)."""

    def __init__(self, client: Any, table_name: str) -> None:
        self.client = client
        self.table_name = table_name

    def _key(self, key: str, collection: str | None) -> dict[str, Any]:
        return {"pk": {"S": f"{KV_PREFIX}{collection or 'default'}#{key}"}, "sk": {"S": "kv"}}

    async def get(self, key: str, *, collection: str | None = None) -> dict[str, Any] | None:
        response = await anyio.to_thread.run_sync(
            lambda: self.client.get_item(TableName=self.table_name, Key=self._key(key, collection))
        )
        item = response.get("Item")
        return None if item is None else dict(json.loads(item["value"]["S"]))

    async def ttl(self, key: str, **kw: Any) -> tuple[dict[str, Any] | None, None]:
        return await self.get(key, **kw), None  # no TTL: the wrong way keeps none

    async def put(
        self, key: str, value: Mapping[str, Any], *, collection: str | None = None, **_: Any
    ) -> None:
        item = {**self._key(key, collection), "value": {"S": json.dumps(dict(value))}}
        await anyio.to_thread.run_sync(
            lambda: self.client.put_item(TableName=self.table_name, Item=item)
        )

    async def delete(self, key: str, *, collection: str | None = None) -> bool:
        response = await anyio.to_thread.run_sync(
            lambda: self.client.delete_item(
                TableName=self.table_name, Key=self._key(key, collection), ReturnValues="ALL_OLD"
            )
        )
        return "Attributes" in response

    # The batch forms, one key after another (as the store this stands for does).

    async def get_many(self, keys: Sequence[str], **kw: Any) -> list[dict[str, Any] | None]:
        return [await self.get(key, **kw) for key in keys]

    async def ttl_many(
        self, keys: Sequence[str], **kw: Any
    ) -> list[tuple[dict[str, Any] | None, float | None]]:
        return [await self.ttl(key, **kw) for key in keys]

    async def put_many(
        self, keys: Sequence[str], values: Sequence[Mapping[str, Any]], **kw: Any
    ) -> None:
        for key, value in zip(keys, values, strict=True):
            await self.put(key, value, **kw)

    async def delete_many(self, keys: Sequence[str], **kw: Any) -> int:
        return sum([await self.delete(key, **kw) for key in keys])


def main(argv: list[str] | None = None) -> int:
    """``python -m sessionstore.tutorial.unconditional``: the FastMCP demo server (the options
    of ``python -m sessionstore.fastmcp``) over this store instead of ``StoreSessionState``."""
    from key_value.aio.protocols.key_value import AsyncKeyValue

    from ..fastmcp.__main__ import main as serve

    def state(store: Any, _: object) -> AsyncKeyValue:  # typed: mypy checks the protocol
        return UnconditionalPutStore(store.client, store.table_name)

    return serve(argv, prog="python -m sessionstore.tutorial.unconditional", state=state)


if __name__ == "__main__":
    raise SystemExit(main())
