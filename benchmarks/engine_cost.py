"""What a request costs the embedded engine: the store's against a source-style UpdateItem.

Same run, one engine, one process, one request at a time, interleaved round by round (so a
noisy neighbour slows every kind alike): the store's ``transition`` (one UpdateItem), its
``update_attributes`` (one TransactWriteItems), the source design's ``UpdateItem`` (``SET status,
updatedAt, version + 1`` on ``version = :v``) and a GetItem. Median wall time per request, and
each as a multiple of the source-style UpdateItem's. Target: the store's two at most
``TARGET`` times the source-style one. Beside the wall time, the time inside the engine's
DynamoDB handler alone (``DynamoHandler.call_action``, when the engine runs in this process):
what is left once HTTP, botocore and the store's own work are taken out.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import sessionstore as ss
from sessionstore import schema

TARGET = 1.3
SOURCE = "source-style UpdateItem (SET status, updatedAt, version + 1 on version = :v)"
KINDS = (
    SOURCE,
    "store transition (UpdateItem)",
    "store update_attributes (TransactWriteItems)",
    "GetItem",
)


@dataclass
class EngineCost:
    rounds: int
    median_ms: dict[str, float]
    #: Median time inside the engine's handler per request (empty: the engine is elsewhere).
    engine_ms: dict[str, float] = field(default_factory=dict)

    def ratio(self, kind: str) -> float:
        return self.median_ms[kind] / self.median_ms[SOURCE]

    def engine_ratio(self, kind: str) -> float:
        return self.engine_ms[kind] / self.engine_ms[SOURCE]

    @property
    def met(self) -> bool:
        return all(self.ratio(kind) <= TARGET for kind in KINDS[1:3])


def run(endpoint: str, *, rounds: int = 60, table: str = "bench-engine-cost") -> EngineCost:
    client = ss.connect(endpoint)
    store = ss.SessionStore(client, table)
    store.create_table()
    fresh = [store.create_session().session_id for _ in range(rounds + 3)]
    changed = store.activate(store.create_session().session_id).session_id
    store.update_attributes(changed, {"k0": "v"})
    source_key = schema.meta_key(store.create_session().session_id)
    version = int(
        client.get_item(TableName=table, Key=source_key, ConsistentRead=True)["Item"]["version"][
            "N"
        ]
    )

    def source(i: int) -> None:
        client.update_item(
            TableName=table,
            Key=source_key,
            UpdateExpression="SET #status = :status, updatedAt = :now, #v = #v + :inc",
            ConditionExpression="#v = :expected",
            ExpressionAttributeNames={"#status": "status", "#v": "version"},
            ExpressionAttributeValues={
                ":status": {"S": "active"},
                ":now": {"S": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}.000Z"},
                ":inc": {"N": "1"},
                ":expected": {"N": str(version + i)},
            },
        )

    steps: dict[str, Callable[[int], Any]] = {
        SOURCE: source,
        KINDS[1]: lambda i: store.transition(fresh[i], ss.Status.ACTIVE),
        KINDS[2]: lambda i: store.update_attributes(changed, {f"k{i % 5}": f"v{i}"}),
        KINDS[3]: lambda i: client.get_item(TableName=table, Key=source_key, ConsistentRead=True),
    }
    times: dict[str, list[float]] = {kind: [] for kind in KINDS}
    inside: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with _handler_time() as spent:
        for i in range(rounds + 3):  # the first 3 rounds warm up, uncounted
            for kind, step in steps.items():
                spent.clear()
                start = time.perf_counter()
                step(i)
                if i >= 3:
                    times[kind].append((time.perf_counter() - start) * 1000)
                    if spent:
                        inside[kind].append(sum(spent) * 1000)
    engine = {k: statistics.median(ts) for k, ts in inside.items() if len(ts) == rounds}
    return EngineCost(
        rounds,
        {kind: statistics.median(ts) for kind, ts in times.items()},
        engine if len(engine) == len(KINDS) else {},
    )


@contextmanager
def _handler_time() -> Iterator[list[float]]:
    """Seconds spent in moto's DynamoDB handler (in this process) per request, while inside."""
    from moto.dynamodb.responses import DynamoHandler

    spent: list[float] = []
    handle = DynamoHandler.call_action

    def timed(self: Any) -> Any:
        start = time.perf_counter()
        try:
            return handle(self)
        finally:
            spent.append(time.perf_counter() - start)

    DynamoHandler.call_action = timed  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        DynamoHandler.call_action = handle  # type: ignore[method-assign]


def markdown(cost: EngineCost) -> str:
    lines = [
        f"Engine cost per request (same run, one engine, median of {cost.rounds} interleaved "
        f"rounds; target: the store's at most {TARGET}x the source-style UpdateItem, "
        f"{'met' if cost.met else 'missed'})",
        "",
        "| request | ms | x source-style UpdateItem | in the engine's handler: ms | x |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind in KINDS:
        inside = (
            f"{cost.engine_ms[kind]:.2f} | {cost.engine_ratio(kind):.2f}x"
            if cost.engine_ms
            else "- | -"
        )
        lines.append(
            f"| {kind} | {cost.median_ms[kind]:.2f} | {cost.ratio(kind):.2f}x | {inside} |"
        )
    return "\n".join(lines) + "\n"
