"""Every test runs against the real embedded engine: moto's server on 127.0.0.1, serialized."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

import sessionstore as ss
from sessionstore.local import LocalDynamoDB
from sessionstore.retry import RetryPolicy
from sessionstore.testing import RequestLog
from sessionstore.testing.soak import scan_table as scan

_tables = itertools.count(1)


@pytest.fixture(scope="session")
def engine() -> Iterator[LocalDynamoDB]:
    with LocalDynamoDB() as running:
        yield running


@pytest.fixture
def client(engine: LocalDynamoDB) -> Any:
    return ss.connect(engine.endpoint_url)


@pytest.fixture
def clock() -> ss.ManualClock:
    return ss.ManualClock("2026-01-01T12:00:00Z")


@pytest.fixture
def table(client: Any) -> str:
    name = f"t{next(_tables)}"
    ss.SessionStore(client, name).create_table()
    return name


@pytest.fixture
def store(client: Any, table: str, clock: ss.ManualClock) -> ss.SessionStore:
    return ss.SessionStore(
        client, table, clock=clock, ids=ss.CounterIds(), retry=RetryPolicy(sleep=lambda _s: None)
    )


@pytest.fixture
def requests(client: Any) -> Iterator[RequestLog]:
    with RequestLog(client) as log:
        yield log


@pytest.fixture
def active(store: ss.SessionStore) -> ss.Session:
    session = store.create_session(owner="alice")
    return store.activate(session.session_id, owner="alice")


__all__ = ["scan"]
