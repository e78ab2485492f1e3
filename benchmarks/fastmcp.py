"""``python -m benchmarks.fastmcp`` -- FastMCP's session state: what a ``set`` and a ``get`` cost
on the store, and the races, stock beside store-backed, from one run (part of ``make bench``).

Cost: FastMCP's own ``Session`` over ``StoreSessionState`` on the embedded engine, requests
counted at botocore; write units computed from the items as stored (``sessionstore.sizing``:
1 WCU per started KB, twice in a transaction; moto reports a flat figure), read units likewise.
Races (``sessionstore.tutorial.fastmcp_race``, FastMCP's ``Client`` over HTTP on 127.0.0.1): 8
clients each set one key of one session at once, 20 rounds (160 keys), on one server and on two
server processes sharing the table; ``end_session`` racing 4 sets, 20 rounds. Stock = FastMCP's own
``Session`` logic over an unconditional-put store (what py-key-value's ``DynamoDBStore`` does;
wrong on purpose). Bounded: fixed rounds, each race under a timeout. No latency is claimed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import sys
from contextlib import AsyncExitStack
from importlib.metadata import version
from typing import Any

from fastmcp.server.sessions import Session
from key_value.aio.adapters.pydantic import PydanticAdapter

import sessionstore as ss
from sessionstore import schema, sizing
from sessionstore.aio import AsyncSessionStore
from sessionstore.fastmcp import StoreSessionState
from sessionstore.fastmcp.demo import create_server
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import RunningServer
from sessionstore.testing import RequestLog
from sessionstore.tutorial.fastmcp_race import end_race, server_processes, set_race
from sessionstore.tutorial.unconditional import UnconditionalPutStore

TABLE = "bench-fastmcp"


def _size(client: Any, key: dict[str, Any]) -> int:
    item = client.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")
    return 0 if item is None else sizing.item_size(item)


async def cost(client: Any, ops: int) -> dict[str, Any]:
    """Requests and units per ``Session.set`` / ``get`` (a warm instance: ``get_session``'s
    check has read the session, as in a tool)."""
    state = StoreSessionState(AsyncSessionStore(ss.SessionStore(client, TABLE)))
    adapter: PydanticAdapter[Any] = PydanticAdapter(key_value=state, pydantic_model=dict)
    session = Session(store=adapter, principal=None, session_id="bench-cost", public_id="x")
    await session._create()
    await session._exists()
    out: dict[str, Any] = {}
    with RequestLog(client) as log:
        for name in ("set", "get"):
            log.reset()
            for i in range(ops):
                if name == "set":
                    await session.set(f"key{i % 8}", {"n": i, "text": "x" * 100})
                else:
                    await session.get(f"key{i % 8}")
            out[name] = {op: n / ops for op, n in sorted(log.counts().items())}
    meta = _size(client, schema.meta_key("bench-cost"))
    attrs = _size(client, schema.attrs_key("bench-cost"))
    # A set: one transaction writing both items (each billed by its larger image) + a Query.
    out["set_wcu"] = sizing.write_units(meta, transactional=True) + sizing.write_units(
        attrs, transactional=True
    )
    out["query_rcu"] = sizing.query_read_units([meta, attrs])
    out["sizes"] = (meta, attrs)
    return out


async def races(engine: LocalDynamoDB, client: Any, rounds: int) -> dict[str, Any]:
    store = AsyncSessionStore(ss.SessionStore(client, TABLE))
    wrong = UnconditionalPutStore(client, TABLE)

    async def store_orphan(session_id: str) -> bool:
        return (await store.get_session(session_id, owner="anon")).status is not ss.Status.CLOSED

    async def stock_orphan(session_id: str) -> bool:
        raw = await wrong.get(f"session:anon:{session_id}", collection="fastmcp_state")
        return raw is not None and "_created" not in raw.get("value", {})

    out: dict[str, Any] = {}
    for label, state in (("store", "store"), ("stock", "unconditional")):
        async with AsyncExitStack() as stack:
            if label == "store":
                server = create_server(StoreSessionState(store))
            else:
                server = create_server(UnconditionalPutStore(client, TABLE))
            one = await stack.enter_async_context(RunningServer(server.http_app()))
            out[label, 1] = await set_race([one.url], rounds=rounds, timeout=300)
            urls = await stack.enter_async_context(
                server_processes(2, engine.endpoint_url, TABLE, state=state)
            )
            out[label, 2] = await set_race(urls, rounds=rounds, timeout=300)
            is_orphan = store_orphan if label == "store" else stock_orphan
            out[label, "end"] = await end_race(urls, is_orphan, rounds=rounds, timeout=300)
    return out


async def measure(ops: int, rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    with LocalDynamoDB() as engine:
        client = ss.connect(engine.endpoint_url)
        ss.SessionStore(client, TABLE).create_table()
        return await cost(client, ops), await races(engine, client, rounds)


def report(c: dict[str, Any], r: dict[str, Any]) -> str:
    def ops(d: dict[str, float]) -> str:
        return " + ".join(f"{n:g} {op}" for op, n in d.items())

    lines = [
        f"FastMCP {version('fastmcp')} session state on sessionstore (embedded engine)",
        f"  set: {sum(c['set'].values()):g} requests ({ops(c['set'])}), "
        f"{c['set_wcu']} WCU (metadata item {c['sizes'][0]} B + state item {c['sizes'][1]} B, "
        "transactional)",
        f"  get: {sum(c['get'].values()):g} request ({ops(c['get'])}), "
        f"{math.ceil(c['query_rcu'] * 2) / 2:g} RCU (consistent)",
        "",
        "| store | keys lost, 1 instance | keys lost, 2 processes | "
        "end vs set: resurrected | orphans |",
        "|---|---|---|---|---|",
    ]
    for label, name in (
        ("stock", "FastMCP's Session over an unconditional-put store (wrong way)"),
        ("store", "StoreSessionState"),
    ):
        one, two, end = r[label, 1], r[label, 2], r[label, "end"]
        lines.append(
            f"| {name} | {one.lost} of {one.keys} | {two.lost} of {two.keys} | "
            f"{end.resurrected} of {end.rounds} | {end.orphans} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fastmcp", description=__doc__)
    parser.add_argument("--ops", type=int, default=50, help="sets and gets measured (each)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds of each race")
    args = parser.parse_args(argv)
    logging.getLogger("fastmcp").setLevel(logging.CRITICAL)  # refused calls are expected
    c, r = asyncio.run(measure(args.ops, args.rounds))
    print(report(c, r))
    failed = r["store", 1].lost or r["store", 2].lost or r["store", "end"].resurrected
    return 1 if failed or r["store", "end"].orphans else 0


if __name__ == "__main__":
    sys.exit(main())
