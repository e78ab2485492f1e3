"""A bounded optimistic-locking race on one item, for tests, notebooks and the soak.

Each worker repeats "read the version, then the source design's append on it"
(``source_design.append_context_messages``: ``list_append`` and ``version + 1`` if the version is
unchanged) until it has committed ``per_worker`` times (or runs out of ``max_attempts``). The
append's version condition is sound -- its defects are elsewhere -- so on a linearizable engine
the final version equals the acknowledged commits and the list holds each acknowledged element
once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from ..schema import meta_key
from .source_design import append_context_messages

__all__ = [
    "RaceResult",
    "main",
    "read_result",
    "setup_item",
    "thread_race",
    "worker",
]


@dataclass
class RaceResult:
    acknowledged: int
    final_version: int
    elements: int
    duplicates: int
    conflicts: int
    events: list[tuple[float, int, str]] = field(default_factory=list)  # (t, worker, kind)

    @property
    def lost_updates(self) -> int:
        return self.acknowledged - self.final_version

    @property
    def lost_elements(self) -> int:
        return self.acknowledged - (self.elements - self.duplicates)


def setup_item(client: Any, table: str, key: str) -> None:
    item = {**meta_key(key), "version": {"N": "0"}, "context": {"L": []}}
    client.put_item(TableName=table, Item=item)


def worker(
    client: Any,
    table: str,
    key: str,
    worker_id: int,
    per_worker: int,
    *,
    max_attempts: int = 10_000,
    deadline_s: float = 60.0,
    events: list[tuple[float, int, str]] | None = None,
    t0: float = 0.0,
) -> tuple[int, int]:
    """Returns (acknowledged commits, conflicts)."""
    acked = conflicts = 0
    stop = time.monotonic() + deadline_s
    note = events.append if events is not None else lambda _event: None
    for _ in range(max_attempts):
        if acked >= per_worker or time.monotonic() > stop:
            break
        item = client.get_item(TableName=table, Key=meta_key(key), ConsistentRead=True)["Item"]
        note((time.monotonic() - t0, worker_id, "attempt"))
        try:
            version = int(item["version"]["N"])
            append_context_messages(client, key, [f"{worker_id}:{acked}"], version, table=table)
            acked += 1
            note((time.monotonic() - t0, worker_id, "commit"))
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            conflicts += 1
            note((time.monotonic() - t0, worker_id, "conflict"))
    return acked, conflicts


def read_result(client: Any, table: str, key: str, acked: int, conflicts: int) -> RaceResult:
    item = client.get_item(TableName=table, Key=meta_key(key), ConsistentRead=True)["Item"]
    elements = [e["S"] for e in item["context"]["L"]]
    return RaceResult(
        acknowledged=acked,
        final_version=int(item["version"]["N"]),
        elements=len(elements),
        duplicates=len(elements) - len(set(elements)),
        conflicts=conflicts,
    )


def thread_race(
    client: Any,
    table: str,
    key: str,
    *,
    threads: int = 8,
    per_worker: int = 50,
    record_events: bool = False,
) -> RaceResult:
    """``threads`` threads share one client (boto3 clients are thread-safe)."""
    setup_item(client, table, key)
    events: list[tuple[float, int, str]] = []
    results: list[tuple[int, int]] = []
    t0 = time.monotonic()

    def run(i: int) -> None:
        log = events if record_events else None
        results.append(worker(client, table, key, i, per_worker, events=log, t0=t0))

    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=120)
    result = read_result(client, table, key, sum(a for a, _ in results), sum(c for _, c in results))
    result.events = sorted(events)
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m sessionstore.tutorial.race ENDPOINT TABLE KEY WORKER_ID N``: one process's
    share of a cross-process race; prints ``acked conflicts``."""
    import sys

    from ..client import connect

    endpoint, table, key, worker_id, n = (argv or sys.argv[1:])[:5]
    acked, conflicts = worker(connect(endpoint), table, key, int(worker_id), int(n))
    print(acked, conflicts, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
