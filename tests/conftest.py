"""Every test runs against the real embedded engine: moto's server on 127.0.0.1, serialized.

``SESSIONSTORE_TEST_ENDPOINT_URL=http://127.0.0.1:8000 make test`` runs the suite against another
engine instead (DynamoDB Local, say): no moto is started for the tests, their tables get a prefix
unique to the pytest process (``sst-<hex>-``) and are deleted when it ends, with every other
table it created through the endpoint; tests marked ``embedded_only`` are skipped with the reason.
(The notebooks do not read this variable: they go on using ``ss.connect()``.)
"""

from __future__ import annotations

import itertools
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import botocore.handlers
import pytest

import sessionstore as ss
from sessionstore.local import LocalDynamoDB
from sessionstore.retry import RetryPolicy
from sessionstore.testing import RequestLog
from tests.support.soak import scan_table as scan

ENDPOINT_VAR = "SESSIONSTORE_TEST_ENDPOINT_URL"
OVERRIDE: str | None = os.environ.get(ENDPOINT_VAR) or None
# Tables of this run on another engine: unique, so runs sharing an endpoint cannot collide.
PREFIX = f"sst-{secrets.token_hex(4)}-" if OVERRIDE else ""
EMBEDDED_ONLY = "needs the embedded engine itself"

_tables = itertools.count(1)
_created: set[str] = set()  # tables this process created through OVERRIDE, whatever their name
_summary: list[str] = []


@dataclass(frozen=True)
class ExternalEngine:
    """The engine at ``SESSIONSTORE_TEST_ENDPOINT_URL``: an address, nothing to start."""

    endpoint_url: str

    @property
    def port(self) -> int:
        port = urlparse(self.endpoint_url).port
        if port is None:
            raise RuntimeError(f"{ENDPOINT_VAR}={self.endpoint_url} names no port")
        return port


def _record_created_table(http_response: Any, parsed: Any, **_kwargs: Any) -> None:
    url = str(getattr(http_response, "url", ""))
    if OVERRIDE and url.startswith(OVERRIDE) and http_response.status_code < 300:
        name = parsed.get("TableDescription", {}).get("TableName")
        if name:
            _created.add(name)


if OVERRIDE:
    # Every botocore session made from now on (ss.connect makes one per client) records the
    # tables it creates, so the tests that name their own tables are cleaned up too.
    botocore.handlers.BUILTIN_HANDLERS.append(
        ("after-call.dynamodb.CreateTable", _record_created_table)
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not OVERRIDE:
        return
    for item in items:
        marker = item.get_closest_marker("embedded_only")
        if marker is not None:
            why = marker.args[0] if marker.args else EMBEDDED_ONLY
            item.add_marker(pytest.mark.skip(reason=f"embedded_only: {why} ({ENDPOINT_VAR} set)"))


def _table_names(client: Any) -> set[str]:
    names: set[str] = set()
    for page in client.get_paginator("list_tables").paginate():
        names.update(page["TableNames"])
    return names


def _delete_tables(client: Any, names: set[str]) -> list[str]:
    """Delete ``names`` (waiting out a table still being created); the ones left undeleted."""
    left = []
    for name in sorted(names):
        for attempt in range(50):
            try:
                client.delete_table(TableName=name)
                break
            except client.exceptions.ResourceNotFoundException:
                break
            except client.exceptions.ResourceInUseException:
                time.sleep(0.1 * min(attempt + 1, 10))
        else:
            left.append(name)
    return left


@pytest.fixture(scope="session", autouse=True)
def _endpoint_tables() -> Iterator[None]:
    """On another engine: after the run, delete every table it created there."""
    if not OVERRIDE:
        yield
        return
    admin = ss.connect(OVERRIDE)
    before = _table_names(admin)
    yield
    now = _table_names(admin)
    ours = {n for n in now if n.startswith(PREFIX)} | (_created & now)
    undeleted = _delete_tables(admin, ours)
    # Created by a subprocess or on a lost response: named so the leftovers can be found (in one
    # pytest process only: xdist's workers would name each other's).
    unknown: list[str] = []
    if "PYTEST_XDIST_WORKER" not in os.environ:
        unknown = sorted(_table_names(admin) - before - {n for n in now if n.startswith("sst-")})
    _summary.append(
        f"{ENDPOINT_VAR}={OVERRIDE}: deleted the {len(ours) - len(undeleted)} tables of this run"
        + (f"; could not delete {undeleted}" if undeleted else "")
        + (f"; new tables it did not create through this process: {unknown}" if unknown else "")
    )


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _summary:  # written here: output during a fixture's teardown is captured
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def engine() -> Iterator[LocalDynamoDB | ExternalEngine]:
    if OVERRIDE:
        yield ExternalEngine(OVERRIDE)
        return
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
    name = f"{PREFIX}t{next(_tables)}"
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
