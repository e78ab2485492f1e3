"""``python -m benchmarks.mcp`` -- what the store costs an MCP server, measured.

Two servers on the same embedded engine, built by ``create_server``: *bare* (``store=None``:
the same ``calculate`` tool, no sessions, no claims) and *store-backed* (``SessionStoreExtension``).
Each runs in this process under uvicorn on 127.0.0.1; the SDK's own ``Client`` (modern
protocol) calls ``calculate`` over HTTP. Rounds alternate bare / store-backed so drift on a
noisy machine hits both alike.

Reported: calls sent, tool executions (counted in the tool), records in the table, DynamoDB
requests per tool call (``RequestLog`` on the serving instance's client: exact), and the median
and p90 client-side latency per call; the difference of medians is the added latency. A second
phase repeats every store-backed call with its tool-call id: the repeats must not execute.

Bounded: ``--calls`` per server (default 200, max 5,000), rounds of 20.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from collections import Counter
from typing import Any

from mcp import Client

import sessionstore as ss
from sessionstore.local import LocalDynamoDB
from sessionstore.mcp import RunningServer, SessionCalls, create_app, create_server, open_session
from sessionstore.mcp import server as mcp_server
from sessionstore.testing import RequestLog
from sessionstore.tutorial import drop_table

KEYS = ["benchmark-request-state-key-0123456789abcdef"]
ROUND = 20


class RequestTimer:
    """Wall time spent inside DynamoDB requests (botocore before-call to after-call)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._local = threading.local()
        self._lock = threading.Lock()
        self.seconds = 0.0

    def _before(self, **_: Any) -> None:
        self._local.began = time.perf_counter()

    def _after(self, **_: Any) -> None:
        with self._lock:
            self.seconds += time.perf_counter() - self._local.began

    def attach(self) -> RequestTimer:
        self._client.meta.events.register("before-call.dynamodb", self._before)
        self._client.meta.events.register("after-call.dynamodb", self._after)
        return self


async def measure(calls: int, endpoint_url: str) -> dict[str, Any]:
    executions: Counter[str] = Counter()

    def calculate(expression: str) -> float | int:
        """The demo calculator, counting its executions."""
        executions["calculate"] += 1
        return mcp_server.calculate(expression)

    client = ss.connect(endpoint_url)
    drop_table(client, "bench-mcp")  # moto's transactions slow down as its table grows
    store = ss.SessionStore(client, "bench-mcp")
    store.create_table()
    bare = create_server(None, state_keys=KEYS, demo_tools=False)
    backed = create_server(store, state_keys=KEYS, demo_tools=False)
    for server in (bare, backed):
        server.add_tool(calculate)

    latency: dict[str, list[float]] = {"bare": [], "store": []}
    log = RequestLog(client)
    async with (
        RunningServer(create_app(bare)) as bare_running,
        RunningServer(create_app(backed)) as backed_running,
        Client(bare_running.url) as bare_client,
        Client(backed_running.url) as backed_client,
    ):
        session = await open_session(backed_client)
        in_session = SessionCalls(backed_client, session.session_id)
        await bare_client.call_tool("calculate", {"expression": "0"})  # warm both paths
        await in_session.call("calculate", {"expression": "0"}, tool_call_id="warm")
        executions.clear()
        log.attach()
        timer = RequestTimer(client).attach()
        for start in range(0, calls, ROUND):  # bounded: calls / ROUND rounds
            for i in range(start, min(start + ROUND, calls)):
                began = time.perf_counter()
                await bare_client.call_tool("calculate", {"expression": f"{i} + 1"})
                latency["bare"].append(time.perf_counter() - began)
            for i in range(start, min(start + ROUND, calls)):
                began = time.perf_counter()
                await in_session.call("calculate", {"expression": f"{i} + 1"}, tool_call_id=f"c{i}")
                latency["store"].append(time.perf_counter() - began)
        fresh_requests = log.counts()
        engine_ms_per_call = timer.seconds * 1000 / calls
        log.reset()
        executions_fresh = executions["calculate"]
        repeat_latency = []
        for i in range(calls):
            began = time.perf_counter()
            result = await in_session.call(
                "calculate", {"expression": f"{i} + 1"}, tool_call_id=f"c{i}"
            )
            repeat_latency.append(time.perf_counter() - began)
            assert (result.meta or {}).get("io.sessionstore/replayed") is True
        repeat_requests = log.counts()
        log.detach()
    history = store.load(session.session_id).tool_calls
    bare_calls = len(latency["bare"])
    return {
        "calls": calls,
        "executions": executions_fresh - bare_calls,  # the bare server's runs counted too
        "bare_executions": bare_calls,
        "executions_after_repeats": executions["calculate"] - bare_calls,
        "records": len(history) - 1,  # minus the warm-up call
        "requests_per_call": sum(fresh_requests.values()) / calls,
        "requests_by_operation": dict(fresh_requests),
        "requests_per_repeat": sum(repeat_requests.values()) / calls,
        "repeat_by_operation": dict(repeat_requests),
        "engine_ms_per_call": round(engine_ms_per_call, 2),
        "bare_ms": _summary(latency["bare"]),
        "store_ms": _summary(latency["store"]),
        "repeat_ms": _summary(repeat_latency),
    }


def _summary(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {
        "median": round(statistics.median(ms), 2),
        "p90": round(ms[int(len(ms) * 0.9) - 1], 2),
    }


def report(r: dict[str, Any]) -> str:
    added = r["store_ms"]["median"] - r["bare_ms"]["median"]
    return "\n".join(
        [
            f"calls: {r['calls']} new tool calls in one session, then each repeated once",
            f"executions: {r['executions']} (after the repeats: {r['executions_after_repeats']})",
            f"records: {r['records']}",
            f"requests per new call: {r['requests_per_call']:.2f} {r['requests_by_operation']}",
            f"requests per repeat: {r['requests_per_repeat']:.2f} {r['repeat_by_operation']}",
            f"latency per call, bare server: median {r['bare_ms']['median']} ms, "
            f"p90 {r['bare_ms']['p90']} ms",
            f"latency per call, store-backed: median {r['store_ms']['median']} ms, "
            f"p90 {r['store_ms']['p90']} ms",
            f"latency per repeat (served from the record): median {r['repeat_ms']['median']} ms",
            f"added latency per call (median): {added:.2f} ms, of which DynamoDB requests "
            f"(mean, the engine's own time included): {r['engine_ms_per_call']} ms",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument(
        "--endpoint-url", default=None, help="an engine in another process (default: in-process)"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.calls <= 5000:
        parser.error("--calls must be in 1..5000")
    if args.endpoint_url is not None:
        result = asyncio.run(asyncio.wait_for(measure(args.calls, args.endpoint_url), 600))
    else:
        with LocalDynamoDB() as engine:
            result = asyncio.run(asyncio.wait_for(measure(args.calls, engine.endpoint_url), 600))
    print(report(result))
    assert result["executions"] == result["calls"] == result["records"]
    assert result["executions_after_repeats"] == result["calls"]
    return 0


if __name__ == "__main__":
    sys.exit(main())
