"""The tutorial: what the notebooks teach with, apart from the store they teach.

Layer: the top of the package; nothing of the store imports it. Here, the notebooks' one-line
set-up (a fresh table, a fixed clock, counter ids); beside it, a module per notebook with its
exercises and checkers (``checking``: the exercise and its verdicts), the pictures
(``pictures``, ``timeline``, ``sequences``), the source design's loops (``source_design``), the
race helpers (``race``, ``fastmcp_race``) and FastMCP over an unconditional store
(``unconditional``), the wrong ways the notebooks compare against.

Every notebook owns one table and recreates it on start, so it runs the same on the embedded
engine, on a shared ``python -m sessionstore engine`` and on DynamoDB Local. Outputs are
deterministic because time and ids are injected, never because outputs are ignored.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from ..client import connect
from ..clock import ManualClock
from ..ids import CounterIds
from ..retry import RetryPolicy
from ..store import SessionStore

__all__ = [
    "START",
    "Tutorial",
    "drop_table",
    "fresh_store",
]

START = "2026-01-01T12:00:00Z"


@dataclass
class Tutorial:
    client: Any
    store: SessionStore
    clock: ManualClock
    ids: CounterIds


def drop_table(client: Any, table_name: str, *, timeout_s: float = 60) -> None:
    """Delete the table if it exists and wait until it is gone (botocore's waiter: a
    ``WaiterError`` after ``timeout_s``)."""
    try:
        client.delete_table(TableName=table_name)
    except client.exceptions.ResourceNotFoundException:
        return
    polls = {"Delay": 0.5, "MaxAttempts": max(1, int(timeout_s / 0.5))}
    client.get_waiter("table_not_exists").wait(TableName=table_name, WaiterConfig=polls)


def fresh_store(
    table_name: str,
    *,
    client: Any = None,
    start: str = START,
    seed: int = 0,
    **store_kwargs: Any,
) -> Tutorial:
    """Recreate ``table_name`` and return a store on it with a ManualClock at ``start``,
    CounterIds and a seeded retry policy (so even backoff delays repeat)."""
    client = client or connect()
    drop_table(client, table_name)
    clock = ManualClock(start)
    ids = CounterIds()
    store_kwargs.setdefault("retry", RetryPolicy(rng=random.Random(seed)))
    store = SessionStore(client, table_name, clock=clock, ids=ids, **store_kwargs)
    store.create_table()
    return Tutorial(client=client, store=store, clock=clock, ids=ids)
