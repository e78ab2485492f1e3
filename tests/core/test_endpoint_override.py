"""``SESSIONSTORE_TEST_ENDPOINT_URL``: the suite against another engine, here a second embedded
engine started as its own process (what CI has; DynamoDB Local is used the same way).

A small part of the suite runs in a child pytest against that endpoint: its tests pass there,
those marked ``embedded_only`` are skipped with the reason, and every table the child created --
the prefixed ones and the one a test names itself -- is gone afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import sessionstore as ss

ROOT = Path(__file__).resolve().parents[2]
SUBSET = [
    # the `table` fixture's tables, one a test names itself, the fault injector
    *(
        f"tests/core/test_sessions.py::test_{name}"
        for name in (
            "create_table_is_idempotent_on_demand_with_ttl",
            "create_session_one_request",
            "duplicate_id_is_refused",
            "create_survives_a_lost_response",
            "get_session_is_consistent_and_one_request",
            "missing_and_foreign_sessions_look_identical",
            "every_allowed_transition_is_one_request",
            "transition_table_is_enforced",
            "transition_failures_are_classified_without_a_second_read",
            "transition_survives_a_lost_response",
            "update_status_uncontended_is_one_request",
            "each_conflict_retry_is_one_request",
        )
    ),
    "tests/engine/test_engine.py::test_connect_uses_standard_retry_mode",
    # embedded_only:
    "tests/engine/test_engine.py::test_engine_listens_on_loopback_with_a_free_port",
]


@pytest.fixture
def other_engine() -> Iterator[str]:
    with tempfile.TemporaryFile("w+") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-m", "sessionstore", "engine"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=ROOT,
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline().strip()
            name, _, url = line.partition("=")
            stderr.seek(0)
            assert name == "SESSIONSTORE_ENDPOINT_URL", (line, stderr.read())
            yield url
        finally:
            server.terminate()
            server.wait(timeout=20)


@pytest.mark.embedded_only("starts a second embedded engine with python -m sessionstore engine")
def test_the_suite_runs_against_another_engine_and_cleans_up(other_engine: str) -> None:
    env = {**os.environ, "SESSIONSTORE_TEST_ENDPOINT_URL": other_engine}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *SUBSET],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    counts = dict(
        (word, int(n)) for n, word in re.findall(r"(\d+) (passed|failed|skipped|error)", out)
    )
    assert counts.get("passed", 0) > 10 and "failed" not in counts and "error" not in counts, out
    assert counts.get("skipped") == 1, out
    assert "embedded_only: checks the embedded engine's own address and port" in out, out
    deleted = re.search(r"SESSIONSTORE_TEST_ENDPOINT_URL=\S+: deleted the (\d+) tables", out)
    assert deleted and int(deleted.group(1)) > 10, out
    assert "could not delete" not in out and "did not create" not in out, out
    assert ss.connect(other_engine).list_tables()["TableNames"] == []
