"""Many instances on one session: does knowing whether a lost write landed stay cheap?

``python -m benchmarks.instances [--fresh 64] [--writers 8] [--appends 10]``

A stateless MCP server behind a load balancer (or a fleet of Lambda containers) is many
``SessionStore`` instances writing to one session, each with its own hints. Phase 1: ``fresh``
new instances append once each (each names its token and never comes back). Phase 2: ``writers``
more instances append ``appends`` times each, all at once (threads, released together). For
each phase: metadata writes (UpdateItem) per committed append, refused metadata writes, writers
that failed, entries left in ``tk``, the metadata item's size and what one write to it is billed,
and whether every message is in the context exactly once. Only public API is used, so the same
script measures an older checkout (run it with that checkout's interpreter).
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import sessionstore as ss
from sessionstore import schema, sizing
from sessionstore.local import LocalDynamoDB
from sessionstore.testing import RequestLog

#: Every run is bounded: a phase that has not finished by then is reported as such.
PHASE_TIMEOUT_S = 300


@dataclass
class Phase:
    name: str
    appends: int
    committed: int
    metadata_writes: int
    failed_writers: int
    tokens_left: int
    item_bytes: int

    @property
    def per_commit(self) -> float:
        return self.metadata_writes / self.committed if self.committed else math.inf

    @property
    def refused(self) -> int:
        return self.metadata_writes - self.committed

    @property
    def wcu_per_metadata_write(self) -> int:
        return math.ceil(self.item_bytes / sizing.WRITE_UNIT_BYTES)


def _meta(client: Any, table: str, sid: str) -> dict[str, Any]:
    item: dict[str, Any] = client.get_item(
        TableName=table, Key=schema.meta_key(sid), ConsistentRead=True
    )["Item"]
    return item


def _phase(
    name: str, client: Any, table: str, sid: str, log: RequestLog, run: Any, appends: int
) -> Phase:
    log.reset()
    committed, failed = run()
    item = _meta(client, table, sid)
    tokens = len(item.get("tk", {}).get("M", {}))
    return Phase(
        name,
        appends,
        committed,
        log.counts()["UpdateItem"],
        failed,
        tokens,
        sizing.item_size(item),
    )


def measure(endpoint_url: str, fresh: int, writers: int, appends: int) -> tuple[list[Phase], str]:
    client = ss.connect(endpoint_url)
    table = f"bench-instances-{time.time_ns()}"
    ss.SessionStore(client, table).create_table()
    setup = ss.SessionStore(client, table)
    sid = setup.create_session().session_id
    setup.activate(sid)
    log = RequestLog(client).attach()

    def one_shot() -> tuple[int, int]:
        for i in range(fresh):
            ss.SessionStore(client, table).append_context(sid, [f"fresh-{i}"])
        return fresh, 0

    def together() -> tuple[int, int]:
        start = threading.Barrier(writers)
        done: list[int] = []
        failed: list[BaseException] = []

        def writer(w: int) -> None:
            store = ss.SessionStore(client, table)
            start.wait(timeout=30)
            try:
                for n in range(appends):
                    store.append_context(sid, [f"w{w}-{n}"])
                    done.append(1)
            except ss.SessionStoreError as exc:
                failed.append(exc)

        threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=PHASE_TIMEOUT_S)
        return len(done), len(failed) + sum(t.is_alive() for t in threads)

    phases = [
        _phase(f"{fresh} fresh instances, 1 append each", client, table, sid, log, one_shot, fresh),
        _phase(
            f"then {writers} writers x {appends} appends at once",
            client,
            table,
            sid,
            log,
            together,
            writers * appends,
        ),
    ]
    context = Counter(ss.SessionStore(client, table).load(sid).context)
    doubled = sum(n - 1 for n in context.values() if n > 1)
    stored = sum(p.committed for p in phases)
    check = (
        f"{len(context)} distinct messages stored for {stored} committed appends, {doubled} doubled"
    )
    return phases, check


def report(phases: list[Phase], check: str) -> str:
    header = (
        "| phase | appends | committed | metadata writes / commit | refused | writers failed "
        "| tk entries | metadata item | WCU per metadata write |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for p in phases:
        lines.append(
            f"| {p.name} | {p.appends} | {p.committed} | {p.per_commit:.2f} | {p.refused} "
            f"| {p.failed_writers} | {p.tokens_left} | {p.item_bytes} B "
            f"| {p.wcu_per_metadata_write} |"
        )
    lines.append("")
    lines.append(check)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh", type=int, default=64)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--appends", type=int, default=10)
    parser.add_argument("--endpoint-url", default=None, help="default: an embedded engine")
    args = parser.parse_args(argv)
    print(f"sessionstore {ss.__file__}", file=sys.stderr)
    if args.endpoint_url:
        phases, check = measure(args.endpoint_url, args.fresh, args.writers, args.appends)
    else:
        with LocalDynamoDB() as engine:
            phases, check = measure(engine.endpoint_url, args.fresh, args.writers, args.appends)
    print(report(phases, check))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
