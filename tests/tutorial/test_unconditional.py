"""The wrong-way FastMCP state store (``sessionstore.tutorial.unconditional``) on the embedded
engine: every ``AsyncKeyValue`` method, the batch forms through the single ones, collections
apart, and the last whole value winning -- the behaviour notebook 09 and the benchmark compare
the store against."""

from __future__ import annotations

import asyncio
from typing import Any

from sessionstore.tutorial.unconditional import UnconditionalPutStore


def test_every_method_round_trips_on_the_engine(client: Any, table: str) -> None:
    kv = UnconditionalPutStore(client, table)

    async def run() -> None:
        await kv.put("a", {"n": 1}, collection="c", ttl=60)  # a TTL is taken and not kept
        assert await kv.get("a", collection="c") == {"n": 1}
        assert await kv.get("a") is None  # another collection
        assert await kv.ttl("a", collection="c") == ({"n": 1}, None)
        await kv.put_many(["a", "b"], [{"n": 2}, {"n": 3}], collection="c", ttl=5)
        assert await kv.get_many(["a", "b", "z"], collection="c") == [{"n": 2}, {"n": 3}, None]
        assert await kv.ttl_many(["b"], collection="c") == [({"n": 3}, None)]
        await kv.put("a", {"other": True}, collection="c")  # the last whole value wins
        assert await kv.get("a", collection="c") == {"other": True}
        assert await kv.delete("a", collection="c") is True
        assert await kv.delete("a", collection="c") is False
        assert await kv.delete_many(["a", "b", "z"], collection="c") == 1

    asyncio.run(asyncio.wait_for(run(), 60))
