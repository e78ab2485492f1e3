"""The command line (``python -m sessionstore``), driven as a subprocess against the test engine."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

import sessionstore as ss
from sessionstore import cli
from sessionstore.cli import target as cli_target
from sessionstore.local import LocalDynamoDB
from sessionstore.testing import RequestLog
from tests.conftest import PREFIX

OWNER = "alice"
TTL_SECONDS = 315_360_000  # ten years: still alive by the wall clock the CLI reads
TTL = 1_767_268_800 + TTL_SECONDS  # the clock fixture starts at 2026-01-01T12:00:00Z
TIMEOUT_S = 60

SHOW = """\
session     s-0001
status      active
owner       alice
version     5
created     2026-01-01T12:00:00.000Z
updated     2026-01-01T12:00:04.000Z
ttl         2082628800  2035-12-30T12:00:00Z  in <LEFT>
messages    3  (116 bytes)
attributes  n = 42
            title = "demo"

context:
seq  message
  0  {"role":"user","content":"hi"}
  1  {"role":"assistant","content":"hello"}
  2  {"role":"user","content":"search \\u001b[31mred"}

tool calls:
recordedAt                toolCallId  toolName   duration  isError  input
2026-01-01T12:00:05.000Z  call-1      search        42 ms  false    {"q":"dynamodb"}
2026-01-01T12:00:06.000Z  call-2      calculate      3 ms  -        {"expression":"6 * 7"}
2026-01-01T12:00:07.000Z  call-3      fail          17 ms  true     {}
"""


def run(
    endpoint: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m sessionstore ARGS`` with the endpoint in the environment, bounded."""
    environ = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL_DYNAMODB"}
    environ.update({"SESSIONSTORE_ENDPOINT_URL": endpoint, "COLUMNS": "100", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "sessionstore", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=environ,
    )


@pytest.fixture
def call(
    engine: LocalDynamoDB, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Any:
    """``cli.main(ARGS)`` in this process (cheaper than a subprocess, for the many small cases):
    a CompletedProcess of its exit code, stdout and stderr."""
    monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
    monkeypatch.setenv("SESSIONSTORE_ENDPOINT_URL", engine.endpoint_url)
    monkeypatch.setenv("COLUMNS", "100")

    def call(*args: str) -> subprocess.CompletedProcess[str]:
        capsys.readouterr()
        code = cli.main(args)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return call


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a failed run, without its prefix."""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("sessionstore: error: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0].removeprefix("sessionstore: error: ")


@pytest.fixture
def session(store: ss.SessionStore, clock: ss.ManualClock) -> ss.Session:
    """s-0001 of alice: two attributes, three messages in two appends, three tool calls."""
    s = store.create_session(owner=OWNER, ttl_seconds=TTL_SECONDS, attributes={"title": "demo"})
    sid = s.session_id
    steps = [
        lambda: store.activate(sid, owner=OWNER),
        lambda: store.append_context(
            sid,
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            owner=OWNER,
        ),
        lambda: store.append_context(
            sid, [{"role": "user", "content": "search \x1b[31mred"}], owner=OWNER
        ),
        lambda: store.update_attributes(sid, {"n": 42}, owner=OWNER),
        lambda: store.record_tool_call(
            sid, "call-1", "search", {"q": "dynamodb"}, {"isError": False}, 42, owner=OWNER
        ),
        lambda: store.record_tool_call(
            sid, "call-2", "calculate", {"expression": "6 * 7"}, 42, 3, owner=OWNER
        ),
        lambda: store.record_tool_call(
            sid, "call-3", "fail", {}, {"isError": True, "content": []}, 17, owner=OWNER
        ),
    ]
    for step in steps:
        clock.advance(seconds=1)
        step()
    return store.get_session(sid, owner=OWNER)


def test_show_prints_metadata_context_and_history_as_tables(
    engine: LocalDynamoDB, table: str, session: ss.Session
) -> None:
    done = run(engine.endpoint_url, "--table", table, "show", "s-0001", "--owner", OWNER)
    assert (done.returncode, done.stderr) == (0, "")
    # the time left is the one value that depends on the wall clock
    shown = re.sub(r"(?m)(EXPIRED|in \d+d \d+h)$", "in <LEFT>", done.stdout, count=1)
    assert shown == SHOW
    assert session.version == 5 and session.message_count == 3


def test_show_json_is_one_document(
    engine: LocalDynamoDB, table: str, store: ss.SessionStore, session: ss.Session
) -> None:
    # the options may also follow the command
    done = run(engine.endpoint_url, "show", "s-0001", "--owner", OWNER, "--table", table, "--json")
    assert (done.returncode, done.stderr) == (0, "")
    document = json.loads(done.stdout)
    loaded = store.load("s-0001", owner=OWNER)
    assert document["session"] == {
        "sessionId": "s-0001",
        "status": "active",
        "owner": OWNER,
        "version": 5,
        "createdAt": "2026-01-01T12:00:00.000Z",
        "updatedAt": "2026-01-01T12:00:04.000Z",
        "ttl": TTL,
        "ttlUtc": "2035-12-30T12:00:00Z",
        "expired": False,
        "messageCount": 3,
        "contextBytes": session.context_bytes,
        "attributes": {"title": "demo", "n": 42},
    }
    assert [c["message"] for c in document["context"]] == list(loaded.context)
    assert [c["seq"] for c in document["context"]] == [0, 1, 2]
    assert document["context"][2]["message"]["content"] == "search \x1b[31mred"  # exact
    assert document["toolCalls"] == [
        {
            "toolCallId": r.tool_call_id,
            "toolName": r.tool_name,
            "recordedAt": r.recorded_at,
            "durationMs": r.duration_ms,
            "input": r.input,
            "output": r.output,
            "ttl": r.ttl,
            "sessionId": "s-0001",
        }
        for r in loaded.tool_calls
    ]
    assert [t["toolCallId"] for t in document["toolCalls"]] == ["call-1", "call-2", "call-3"]


def test_context_after_and_limit(
    engine: LocalDynamoDB, table: str, session: ss.Session, call: Any
) -> None:
    base = ("--table", table, "context", "s-0001", "--owner", OWNER)
    done = run(engine.endpoint_url, *base, "--after", "0", "--limit", "1", "--json")
    assert (done.returncode, done.stderr) == (0, "")
    second = {"seq": 1, "message": {"role": "assistant", "content": "hello"}}
    assert [json.loads(line) for line in done.stdout.splitlines()] == [second]

    done = call(*base, "--json")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["seq"] for line in lines] == [0, 1, 2]
    assert lines[1] == second

    done = call(*base, "--after", "1")
    assert done.stdout == 'seq  message\n  2  {"role":"user","content":"search \\u001b[31mred"}\n'

    done = call(*base, "--after", "2")
    assert (done.returncode, done.stdout, done.stderr) == (0, "  (none)\n", "")


def test_history_after_an_id_or_a_time_and_limit(
    engine: LocalDynamoDB, table: str, session: ss.Session, call: Any
) -> None:
    base = ("--table", table, "history", "s-0001", "--owner", OWNER)
    done = run(engine.endpoint_url, *base, "--after", "call-1", "--limit", "1")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "recordedAt                toolCallId  toolName   duration  isError  input",
        "2026-01-01T12:00:06.000Z  call-2      calculate      3 ms  -        "
        '{"expression":"6 * 7"}',
    ]
    done = run(engine.endpoint_url, *base, "--after", "call-9")
    assert done.returncode == 1 and done.stdout == ""
    assert one_error_line(done) == "tool call 'call-9' is not in the history of session 's-0001'"

    def ids(*args: str) -> list[str]:
        done = call(*base, *args, "--json")
        assert (done.returncode, done.stderr) == (0, "")
        return [json.loads(line)["toolCallId"] for line in done.stdout.splitlines()]

    assert ids() == ["call-1", "call-2", "call-3"]
    assert ids("--limit", "2") == ["call-1", "call-2"]
    assert ids("--after", "call-1") == ["call-2", "call-3"]
    assert ids("--after", "call-1", "--limit", "1") == ["call-2"]
    assert ids("--after", "call-3") == []
    assert ids("--after", "2026-01-01T12:00:05.000Z") == ["call-2", "call-3"]
    assert ids("--after", "2026-01-01T12:00:05Z") == ["call-2", "call-3"]
    assert ids("--after", "2026-01-01T12:00:04.999Z") == ["call-1", "call-2", "call-3"]


def test_missing_or_foreign_session_is_not_found(
    engine: LocalDynamoDB, table: str, session: ss.Session, call: Any
) -> None:
    done = run(engine.endpoint_url, "--table", table, "show", "nope", "--owner", OWNER)
    assert (done.returncode, done.stdout) == (1, "")
    assert one_error_line(done) == "session 'nope' not found"
    for args in (
        ("show", "s-0001", "--owner", "mallory"),  # another owner's: the same answer
        ("show", "s-0001"),  # an owned session is not read without its owner
        ("context", "s-0001", "--owner", "mallory", "--json"),
        ("history", "nope", "--owner", OWNER),
    ):
        done = call("--table", table, *args)
        assert (done.returncode, done.stdout) == (1, ""), args
        assert one_error_line(done) == f"session {args[1]!r} not found"


def test_expired_session_is_shown_marked_and_exits_1(
    engine: LocalDynamoDB, client: Any, table: str, call: Any
) -> None:
    an_hour_ago = time.time_ns() // 1_000_000 - 3_600_000
    store = ss.SessionStore(client, table, clock=ss.ManualClock(an_hour_ago), ids=ss.CounterIds())
    ttl = store.create_session(owner=OWNER, ttl_seconds=60).ttl
    utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ttl))

    done = run(engine.endpoint_url, "--table", table, "show", "s-0001", "--owner", OWNER)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "session  s-0001",
        "status   EXPIRED (the store reads nothing more of an expired session)",
        f"ttl      {ttl}  {utc}  EXPIRED",
    ]
    assert one_error_line(done) == f"session 's-0001' expired at {utc} (ttl {ttl})"

    done = run(engine.endpoint_url, "--table", table, "show", "s-0001", "--owner", OWNER, "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout) == {
        "session": {"sessionId": "s-0001", "ttl": ttl, "ttlUtc": utc, "expired": True},
        "context": None,
        "toolCalls": None,
    }

    done = call("--table", table, "context", "s-0001", "--owner", OWNER)
    assert (done.returncode, done.stdout) == (1, "")
    assert "expired" in one_error_line(done)
    # another owner cannot learn that it exists, expired or not
    done = call("--table", table, "show", "s-0001", "--owner", "mallory")
    assert (done.returncode, done.stdout) == (1, "")
    assert one_error_line(done) == "session 's-0001' not found"


def test_missing_table_is_a_configuration_error(engine: LocalDynamoDB, call: Any) -> None:
    message = (
        f"table 'no-such-table' not found at {engine.endpoint_url} "
        "(create it with `sessionstore create-table --table no-such-table`)"
    )
    done = run(engine.endpoint_url, "--table", "no-such-table", "show", "s-0001")
    assert (done.returncode, done.stdout) == (2, "")
    assert one_error_line(done) == message
    for command in ("context", "history"):
        done = call("--table", "no-such-table", command, "s-0001")
        assert (done.returncode, done.stdout) == (2, ""), command
        assert one_error_line(done) == message


def test_bad_endpoints(engine: LocalDynamoDB, table: str, call: Any) -> None:
    started = time.monotonic()
    done = run("http://127.0.0.1:9", "--table", table, "show", "s-0001")  # a closed port
    assert (done.returncode, done.stdout) == (3, "")
    assert one_error_line(done).startswith("DynamoDB unreachable")
    assert "http://127.0.0.1:9" in done.stderr
    assert time.monotonic() - started < 30  # botocore's retries are short on a refused port

    done = run("127.0.0.1:8000", "show", "s-0001")  # from the environment
    assert (done.returncode, done.stdout) == (2, "")
    assert one_error_line(done) == (
        "bad endpoint '127.0.0.1:8000' (from the environment): "
        "expected http(s)://HOST[:PORT] or 'aws'"
    )
    for endpoint in ("ftp://x", "http://127.0.0.1:99999", "http://"):
        done = call("--endpoint-url", endpoint, "show", "s-0001")
        assert (done.returncode, done.stdout) == (2, "")
        assert one_error_line(done).startswith(f"bad endpoint {endpoint!r}: expected")
    # the argument beats the environment, as in connect()
    done = run("http://127.0.0.1:9", "--endpoint-url", engine.endpoint_url, "--table", table,
               "show", "x")  # fmt: skip
    assert done.returncode == 1


def test_usage_errors_are_one_line(engine: LocalDynamoDB, table: str, call: Any) -> None:
    done = run(engine.endpoint_url)
    assert (done.returncode, done.stdout) == (2, "")
    message = "the following arguments are required: COMMAND (see sessionstore --help)"
    assert one_error_line(done) == message
    for args, message in [
        (("show",), "the following arguments are required: SESSION_ID"),
        (("context", "x", "--limit", "0"), "argument --limit: expected a positive integer"),
        (("context", "x", "--after", "-1"), "argument --after: expected a seq"),
        (("frobnicate",), "argument COMMAND: invalid choice: 'frobnicate'"),
        (("engine", "--host", "0.0.0.0"), "argument --host: invalid choice: '0.0.0.0'"),
        (("history", "x", "--after", "2026-13-01T00:00:00Z"), "--after '2026-13-01T00:00:00Z'"),
        (("--table", table, "show", "bad id"), "session_id may hold only visible ASCII"),
    ]:
        done = call(*args)
        assert (done.returncode, done.stdout) == (2, ""), args
        assert one_error_line(done).startswith(message), (args, done.stderr)

    done = run(engine.endpoint_url, "--help")
    assert done.returncode == 0
    assert "Exit codes:" in done.stdout and "3    DynamoDB unavailable" in done.stdout


def test_create_table_says_whether_it_created_it(engine: LocalDynamoDB, call: Any) -> None:
    name = f"{PREFIX}cli-{time.time_ns()}"  # prefixed: deleted after a run on another engine
    done = run(engine.endpoint_url, "create-table", "--table", name)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"table {name!r} created at {engine.endpoint_url}\n"
    done = call("--table", name, "create-table", "--json")
    assert json.loads(done.stdout) == {
        "table": name,
        "endpoint": engine.endpoint_url,
        "created": False,
    }


def first_line(process: subprocess.Popen[str], timeout_s: float = TIMEOUT_S) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout_s)
    assert ready, "no line in time"
    return process.stdout.readline().strip()


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes to start; any still running at the end is killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=TIMEOUT_S)


@pytest.mark.embedded_only("starts an embedded engine of its own")
def test_engine_serves_other_processes_until_terminated(
    spawn: list[subprocess.Popen[str]],
) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.endswith("ENDPOINT_URL_DYNAMODB")}
    environ.pop("SESSIONSTORE_ENDPOINT_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "sessionstore", "engine", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    spawn.append(process)
    name, url = first_line(process).split("=", 1)
    assert name == "SESSIONSTORE_ENDPOINT_URL"
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)

    done = run(url, "create-table")
    assert (done.returncode, done.stdout) == (0, f"table 'mcp-sessions' created at {url}\n")
    done = run(url, "show", "nobody")
    assert done.returncode == 1

    process.terminate()
    assert process.wait(timeout=TIMEOUT_S) == 0
    assert process.stderr is not None
    stderr = process.stderr.read()
    assert f"export SESSIONSTORE_ENDPOINT_URL={url}\n" in stderr
    assert "Traceback" not in stderr


def test_engine_refuses_a_taken_port(engine: LocalDynamoDB) -> None:
    done = run(engine.endpoint_url, "engine", "--port", str(engine.port))
    assert (done.returncode, done.stdout) == (2, "")
    assert one_error_line(done).startswith(f"cannot listen on 127.0.0.1:{engine.port}")


def test_reads_page_lazily_and_stop_at_the_limit(
    client: Any,
    table: str,
    store: ss.SessionStore,
    requests: RequestLog,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """1.4 MB of context is two Query pages or more; --limit 2 reads the first page alone.
    (In-process, to count the requests the CLI sends.)"""
    sid = store.create_session(ttl_seconds=TTL_SECONDS).session_id
    store.activate(sid)
    for n in range(35):
        store.append_context(sid, [{"n": n, "pad": "x" * 40_000}])
    monkeypatch.setattr(cli_target, "connect", lambda *_a, **_k: client)
    argv = ["--table", table, "context", sid, "--json"]

    requests.reset()
    assert cli.main([*argv, "--limit", "2"]) == 0
    assert [json.loads(line)["seq"] for line in capsys.readouterr().out.splitlines()] == [0, 1]
    assert requests.operations == ["Query"]

    requests.reset()
    assert cli.main(argv) == 0
    assert len(capsys.readouterr().out.splitlines()) == 35
    assert requests.operations.count("Query") >= 2
