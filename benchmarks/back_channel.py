"""``python -m benchmarks.back_channel`` -- what a server-to-client request costs in a session kept
in the table (part of ``make bench``).

A conformance fixture tool (``test_sampling``) asks the client through ``ctx.session``; the SDK's
``Client`` answers after a set delay. Two instances on one engine behind the round robin, so the
answer reaches the other instance. Requests are counted at botocore on each instance and the
read units computed from the items as stored (``sessionstore.sizing``; moto reports a flat
figure). Each delay is run once; the count of polls follows the schedule
(``back_channel.POLLS``, then one a second), which is what the figure shows. Bounded: three
delays, each call under a timeout. No latency is claimed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from mcp import Client
from mcp_types import CreateMessageRequestParams, CreateMessageResult, TextContent

import sessionstore as ss
from sessionstore import asks, schema, sizing
from sessionstore.conformance import fixtures as fx
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import RunningServer, create_app, create_server
from sessionstore.retry import RetryPolicy
from sessionstore.testing import RequestLog
from sessionstore.testing.proxy import RoundRobinProxy

TABLE = "bench-back-channel"
KEYS = ["bench-request-state-key-0123456789abcdef"]
DELAYS = (0.0, 5.0, 20.0)


async def one_call(engine: LocalDynamoDB, delay: float) -> dict[str, Any]:
    stores = [
        ss.SessionStore(
            ss.connect(engine.endpoint_url), TABLE, retry=RetryPolicy(sleep=lambda _s: None)
        )
        for _ in range(2)
    ]
    logs = [RequestLog(store.client).attach() for store in stores]

    async def sample(context: Any, params: CreateMessageRequestParams) -> CreateMessageResult:
        await asyncio.sleep(delay)
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="Paris"), model="bench"
        )

    def app(store: ss.SessionStore) -> Any:
        server = create_server(store, state_keys=KEYS)
        fx.add_conformance_fixtures(server)
        return create_app(server)

    async with RunningServer(app(stores[0])) as a, RunningServer(app(stores[1])) as b:
        proxy = RoundRobinProxy([a.url.removesuffix("/mcp"), b.url.removesuffix("/mcp")])
        try:
            async with (
                RunningServer(proxy) as lb,
                Client(lb.url, mode="legacy", sampling_callback=sample) as client,
            ):
                await client.call_tool("test_simple_text", {})  # the session is warm on both
                for log in logs:
                    log.reset()
                await client.call_tool("test_simple_text", {})
                plain = [op for log in logs for op in log.operations]
                for log in logs:
                    log.reset()
                async with asyncio.timeout(delay + 30):
                    result = await client.call_tool("test_sampling", {"prompt": "Capital?"})
                operations = [op for log in logs for op in log.operations]
        finally:
            await proxy.aclose()
    assert not result.is_error, result
    client = stores[0].client
    items = client.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    sid = next(i["sessionId"]["S"] for i in items if i["sk"]["S"] == schema.META_SK)
    ask = next(i for i in items if i["sk"]["S"].startswith(asks.ASK_PREFIX))
    meta = next(i for i in items if i["sk"]["S"] == schema.META_SK)
    polls = operations.count("Query")
    return {
        "delay": delay,
        "session": sid,
        "polls": polls,
        "poll_rcu": sizing.query_read_units([sizing.item_size(ask), sizing.item_size(meta)]),
        "operations": operations,
        "plain": plain,
    }


async def run() -> list[dict[str, Any]]:
    with LocalDynamoDB() as engine:
        ss.SessionStore(ss.connect(engine.endpoint_url), TABLE).create_table()
        return [await one_call(engine, delay) for delay in DELAYS]


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    logging.getLogger("mcp").setLevel(logging.ERROR)
    rows = asyncio.run(run())
    print("A server-to-client request (sampling) in a legacy session, two instances, round robin")
    print("| client answers after | polls (consistent Query) | read units | per second |")
    print("|---|---|---|---|")
    for row in rows:
        units = row["polls"] * row["poll_rcu"]
        rate = f"{units / row['delay']:.2f}" if row["delay"] else "--"
        print(f"| {row['delay']:.0f} s | {row['polls']} | {units:g} | {rate} |")
    asking, plain = rows[0]["operations"], rows[0]["plain"]
    added = {
        op: asking.count(op) - plain.count(op)
        for op in sorted(set(asking) | set(plain))
        if op != "Query" and asking.count(op) != plain.count(op)
    }
    print(
        "A tool call that asks, against one that does not (the same session, warm): "
        + ", ".join(f"{n:+d} {op}" for op, n in added.items())
        + ", and the polls. The ask, the answer and its removal once read are 1 WCU each here"
        " (the answer under 1 KB); a poll reads the ask and the metadata item:"
        f" {rows[0]['poll_rcu']:g} RCU."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
