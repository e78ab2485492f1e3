"""A bounded optimistic-locking race on one item, for tests, notebooks and the soak.

Each worker repeats "read version, conditional write version+1 with list_append" until it has
committed ``per_worker`` times (or runs out of ``max_attempts``). On a linearizable engine the
final version equals the acknowledged commits and the list holds each acknowledged element once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError


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
    client.put_item(
        TableName=table,
        Item={"pk": {"S": key}, "sk": {"S": "race"}, "version": {"N": "0"}, "items": {"L": []}},
    )


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
    k = {"pk": {"S": key}, "sk": {"S": "race"}}
    acked = conflicts = 0
    stop = time.monotonic() + deadline_s
    for _ in range(max_attempts):
        if acked >= per_worker or time.monotonic() > stop:
            break
        version = int(
            client.get_item(TableName=table, Key=k, ConsistentRead=True)["Item"]["version"]["N"]
        )
        if events is not None:
            events.append((time.monotonic() - t0, worker_id, "attempt"))
        try:
            client.update_item(
                TableName=table,
                Key=k,
                UpdateExpression="SET #v = :new, #i = list_append(#i, :el)",
                ConditionExpression="#v = :old",
                ExpressionAttributeNames={"#v": "version", "#i": "items"},
                ExpressionAttributeValues={
                    ":new": {"N": str(version + 1)},
                    ":old": {"N": str(version)},
                    ":el": {"L": [{"S": f"{worker_id}:{acked}"}]},
                },
            )
            acked += 1
            if events is not None:
                events.append((time.monotonic() - t0, worker_id, "commit"))
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            conflicts += 1
            if events is not None:
                events.append((time.monotonic() - t0, worker_id, "conflict"))
    return acked, conflicts


def read_result(client: Any, table: str, key: str, acked: int, conflicts: int) -> RaceResult:
    item = client.get_item(
        TableName=table, Key={"pk": {"S": key}, "sk": {"S": "race"}}, ConsistentRead=True
    )["Item"]
    elements = [e["S"] for e in item["items"]["L"]]
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
