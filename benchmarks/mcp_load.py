"""``python -m benchmarks.mcp_load`` -- many MCP clients, two server processes, one engine.

One embedded engine (``python -m sessionstore engine``) and two demo servers
(``python -m sessionstore.mcp``) on it, each its own process on 127.0.0.1. ``--clients``
concurrent clients (the SDK's own ``mcp.Client``) send ``--calls`` ``note`` calls each; call i of
a client goes to server i % 2, so every session is written through both processes. "On their own
sessions and one shared session" is read as: the even-numbered clients each on a session of
their own, the odd-numbered ones all on one shared session (24 clients: 12 + 12, so 240 calls in
12 private sessions and 240 contending in the shared one). Every call has its own tool-call id,
which is also the note's text, so the table can be audited call by call.

Measured from the moment every client is connected and has its session (a barrier) until the
last call returns: calls/s, and p50 / p99 client-side latency per call. Then each session is
read back (``store.load``): every acknowledged call must have exactly one record and exactly
one note. Exit 1 if anything is lost or doubled, 2 if only some calls failed, else 0.
Bounded: at most 64 clients x 100 calls, start-ups of 60 s, everything within ``--timeout``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from typing import IO, Any

from mcp import Client

import sessionstore as ss
from sessionstore.mcp import SessionCalls, open_session

from .report import update_block

TABLE = "bench-mcp-load"
STATE_KEYS = "benchmark-mcp-load-state-key-0123456789abcdef"  # shared: any instance serves
START_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as sock:  # bind to 0 and let go: a small race, fine on loopback
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def spawn(
    args: list[str], log: IO[bytes], stdout: int | IO[bytes]
) -> asyncio.subprocess.Process:
    env = {**os.environ, "SESSIONSTORE_MCP_STATE_KEYS": STATE_KEYS, "PYTHONUNBUFFERED": "1"}
    return await asyncio.create_subprocess_exec(
        sys.executable, *args, stdout=stdout, stderr=log, env=env
    )


async def wait_listening(proc: asyncio.subprocess.Process, port: int) -> None:
    async with asyncio.timeout(START_SECONDS):
        while True:  # bounded by the timeout
            if proc.returncode is not None:
                raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            writer.close()
            return


async def client(
    n: int, urls: list[str], session_id: str | None, calls: int, start: asyncio.Barrier
) -> tuple[str, list[tuple[str, float, str | None]]]:
    done: list[tuple[str, float, str | None]] = []  # (tool-call id, seconds, error or None)
    async with contextlib.AsyncExitStack() as stack:
        try:
            first = await stack.enter_async_context(Client(urls[0]))
            second = await stack.enter_async_context(Client(urls[1]))
            if session_id is None:
                session_id = (await open_session(first)).session_id
        except BaseException:
            await start.abort()  # the others stop waiting now, not at --timeout
            raise
        # One SessionCalls per server, same session id: it goes in every call's _meta.
        ways = [SessionCalls(first, session_id), SessionCalls(second, session_id)]
        await start.wait()  # the clock starts when every client is ready
        for i in range(calls):
            call_id = f"c{n:02d}-{i:03d}"
            began = time.perf_counter()
            error = None
            try:
                result = await ways[i % 2].call("note", {"text": call_id}, tool_call_id=call_id)
                if result.is_error:
                    error = f"isError: {result.content[0] if result.content else ''}"[:120]
            except Exception as exc:  # a failed call is counted, not fatal to the run
                error = f"{type(exc).__name__}: {exc}"[:120]
            done.append((call_id, time.perf_counter() - began, error))
    return session_id, done


async def measure(clients: int, calls: int, logs: str) -> dict[str, Any]:
    procs: list[asyncio.subprocess.Process] = []
    log = open(os.path.join(logs, "processes.log"), "wb")  # noqa: SIM115 - closed in finally
    try:
        engine = await spawn(["-m", "sessionstore", "engine"], log, asyncio.subprocess.PIPE)
        procs.append(engine)
        # The engine's first stdout line is SESSIONSTORE_ENDPOINT_URL=..., once it listens.
        assert engine.stdout is not None
        line = await asyncio.wait_for(engine.stdout.readline(), START_SECONDS)
        if not line.startswith(b"SESSIONSTORE_ENDPOINT_URL="):
            raise RuntimeError(f"engine did not start: {line!r}")
        endpoint = line.decode().strip().split("=", 1)[1]
        store = ss.SessionStore(ss.connect(endpoint), TABLE)
        store.create_table()  # before the servers: two processes racing to create it is noise
        ports = [free_port()]
        while len(ports) < 2:  # bounded in practice: the kernel rarely repeats a port
            ports = list(dict.fromkeys([*ports, free_port()]))
        for port in ports:
            argv = ["-m", "sessionstore.mcp", "--port", str(port), "--endpoint-url", endpoint]
            procs.append(await spawn([*argv, "--table", TABLE], log, log))
        for proc, port in zip(procs[1:], ports, strict=True):
            await wait_listening(proc, port)
        urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]
        async with Client(urls[1]) as opener:
            shared = (await open_session(opener)).session_id
        start = asyncio.Barrier(clients + 1)
        tasks = [
            asyncio.create_task(client(n, urls, shared if n % 2 else None, calls, start))
            for n in range(clients)
        ]
        try:
            await start.wait()
        except asyncio.BrokenBarrierError:
            # A client's set-up failed: raise its error, not the barrier the others saw broken.
            failures = await asyncio.gather(*tasks, return_exceptions=True)
            raise next(
                e
                for e in failures
                if isinstance(e, BaseException) and not isinstance(e, asyncio.BrokenBarrierError)
            ) from None
        began = time.perf_counter()
        outcomes = await asyncio.gather(*tasks)
        wall = time.perf_counter() - began
        return {"wall": wall, "outcomes": outcomes, "audit": audit(store, outcomes)}
    finally:
        for proc in procs:  # always: no engine or server outlives the run
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 10)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
        log.close()


def audit(store: ss.SessionStore, outcomes: list[Any]) -> dict[str, Any]:
    sent: dict[str, list[tuple[str, float, str | None]]] = {}
    for session_id, done in outcomes:
        sent.setdefault(session_id, []).extend(done)
    totals: Counter[str] = Counter()
    for session_id, done in sent.items():
        loaded = store.load(session_id)
        records = Counter(r.tool_call_id for r in loaded.tool_calls)
        noted = Counter(
            str(m.get("text"))
            for m in loaded.context
            if isinstance(m, dict) and m.get("role") == "note"
        )
        acked = {call_id for call_id, _, error in done if error is None}
        totals["records"] += sum(records.values())
        totals["notes"] += sum(noted.values())
        totals["lost"] += sum(1 for c in acked if records[c] == 0 or noted[c] == 0)
        totals["doubled"] += sum(1 for c in records | noted if records[c] > 1 or noted[c] > 1)
        # A failed call whose note landed anyway: not a loss, but the client was not told.
        totals["landed_unacked"] += len(set(noted) - acked)
        totals["sessions_off"] += len(noted) != len(acked) or loaded.session.message_count != sum(
            noted.values()
        )
    totals["sessions"] = len(sent)
    return dict(totals)


def split(r: dict[str, Any], odd: int) -> str:
    # Even clients own their session, odd ones share one: is contention the cost?
    seconds = [s for n, (_, done) in enumerate(r["outcomes"]) if n % 2 == odd for _, s, _ in done]
    return f"{statistics.median(seconds):.2f} s"


def report(r: dict[str, Any], clients: int, calls: int) -> str:
    done = [c for _, per_client in r["outcomes"] for c in per_client]
    seconds = sorted(s for _, s, _ in done)
    errors = Counter(e.split(":")[0] for _, _, e in done if e is not None)
    a = r["audit"]
    p99 = seconds[math.ceil(0.99 * len(seconds)) - 1]
    lines = [
        f"{clients} clients x {calls} note calls = {len(done)} calls, two servers, one engine",
        f"throughput: {len(done) / r['wall']:.1f} calls/s ({r['wall']:.1f} s wall)",
        f"latency per call: p50 {statistics.median(seconds):.2f} s, p99 {p99:.2f} s, "
        f"max {seconds[-1]:.2f} s; p50 on own sessions {split(r, 0)}, on the shared {split(r, 1)}",
        f"succeeded: {len(done) - sum(errors.values())}, errors: {sum(errors.values())} "
        f"{dict(errors) or ''}",
        f"table: {a['records']} records, {a['notes']} notes in {a['sessions']} sessions; "
        f"lost {a['lost']}, doubled {a['doubled']}, landed though failed "
        f"{a['landed_unacked']}, sessions whose notes != successes {a['sessions_off']}",
    ]
    first_error = next((e for _, _, e in done if e is not None), None)
    return "\n".join(lines + ([f"first error: {first_error}"] if first_error else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp_load", description=__doc__)
    parser.add_argument("--clients", type=int, default=24, help="concurrent clients (2..64)")
    parser.add_argument("--calls", type=int, default=20, help="note calls per client (1..100)")
    parser.add_argument("--timeout", type=float, default=900, help="whole run, seconds")
    args = parser.parse_args(argv)
    if not 2 <= args.clients <= 64:
        parser.error("--clients must be in 2..64")
    if not 1 <= args.calls <= 100:
        parser.error("--calls must be in 1..100")
    with tempfile.TemporaryDirectory(prefix="mcp-load-") as logs:
        run = measure(args.clients, args.calls, logs)
        try:
            result = asyncio.run(asyncio.wait_for(run, args.timeout))
        except BaseException:
            with open(os.path.join(logs, "processes.log"), errors="replace") as f:
                print(f.read()[-3000:], file=sys.stderr)  # the servers' last words
            raise
    print(report(result, args.clients, args.calls))
    a = result["audit"]
    if a["lost"] or a["doubled"]:
        return 1
    failed = any(e is not None for _, done in result["outcomes"] for _, _, e in done)
    if not failed:
        update_block("bench-mcp-load", page_paragraph(result, args.clients, args.calls))
    return 2 if failed else 0


def page_paragraph(r: dict[str, Any], clients: int, calls: int) -> str:
    """The ``bench-mcp-load`` block of docs/benchmarks.md: this run's figures, dated."""
    seconds = sorted(s for _, per_client in r["outcomes"] for _, s, _ in per_client)
    p99 = seconds[math.ceil(0.99 * len(seconds)) - 1]
    a = r["audit"]
    return (
        f"Under load (`python -m benchmarks.mcp_load --clients {clients} --calls {calls}`, which "
        f"writes this paragraph: {clients} clients x {calls} `note` calls, two server processes "
        f"on one engine process): {len(seconds) / r['wall']:.1f} calls/s, p50 "
        f"{statistics.median(seconds):.1f} s, p99 {p99:.1f} s, {a['records']} of {len(seconds)} "
        f"recorded once ({datetime.now(UTC):%Y-%m-%d}). moto is pure Python and serves one "
        "request at a time; real DynamoDB is faster, not measured here."
    )


if __name__ == "__main__":
    sys.exit(main())
