"""``python -m sessionstore`` (console script ``sessionstore``): sessions from a shell.

    sessionstore [--endpoint-url URL] [--table NAME] [--region REGION] COMMAND ...

    show SESSION_ID [--owner O] [--json]           metadata, context and tool-call history
    context SESSION_ID [--owner O] [--after SEQ] [--limit N] [--json]
    history SESSION_ID [--owner O] [--after TOOL_CALL_ID|TIME] [--limit N] [--json]
    create-table [--json]                          create the table if missing
    engine [--port P] [--host 127.0.0.1]           the embedded DynamoDB, until Ctrl-C / SIGTERM

The endpoint follows ``sessionstore.connect()``: ``--endpoint-url``, else
``SESSIONSTORE_ENDPOINT_URL`` (``aws`` = real DynamoDB), else ``AWS_ENDPOINT_URL_DYNAMODB``,
else an embedded engine started in this process -- empty, so point the CLI at a running one
(``sessionstore engine`` prints the line to export). The global options may also follow the
command.

Reads page lazily: rows are printed as the store's iterators yield them, and ``--limit`` stops
the reading. Text output is aligned tables, messages and inputs cut to the terminal width
(``COLUMNS``); ``--json`` writes one JSON document for ``show`` and JSON Lines for ``context``
and ``history``, nothing cut. ``history --after`` takes a tool-call id (the records after it)
or a UTC time such as ``2026-01-01T12:00:00Z`` (those recorded later); the store has no start
key for the history, so the records before it are read and skipped.

Exit codes:
  0    success
  1    not found: no such session, another owner's (the two look the same), an expired
       one (show still prints what the store tells of it: its id and ttl), or a
       history --after tool-call id that is not in the history
  2    usage or configuration: bad arguments, a bad endpoint, a missing table, missing
       credentials or region, a request DynamoDB refused, the engine's port taken
  3    DynamoDB unavailable: unreachable, throttling or server errors after retries
  130  interrupted

Every error is one line on stderr: "sessionstore: error: ...".
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import itertools
import json
import os
import re
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import IO, Any, NoReturn
from urllib.parse import urlparse

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, NoRegionError
from botocore.exceptions import ConnectionError as BotoConnectionError

from .client import configured_endpoint, connect
from .clock import SystemClock, format_timestamp, parse_timestamp
from .errors import (
    InvalidInput,
    SessionExpired,
    SessionNotFound,
    SessionStoreError,
    TableNotFound,
    Unavailable,
)
from .models import Session, ToolCallRecord
from .store import SessionStore

PROG = "sessionstore"
EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130

#: The store's own default table name, so the two cannot drift apart.
DEFAULT_TABLE: str = str(inspect.signature(SessionStore).parameters["table_name"].default)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_THROTTLES = frozenset(
    {"ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded"}
)
_SERVER_ERRORS = frozenset({"InternalServerError", "ServiceUnavailable", "InternalFailure"})
#: Rows a table holds back to size its columns (a Query page brings at least this many).
_SIZING_ROWS = 100
_MIN_LAST_COLUMN = 20
_TIME_PREFIX = re.compile(r"\d{4}-\d{2}-\d{2}T")

_EPILOG = "Exit codes:" + (__doc__ or "").split("Exit codes:", 1)[-1]


class Failure(Exception):
    """Ends the command: ``message`` on stderr, exit ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors as one line (``sessionstore: error: ...``), exit 2."""

    def error(self, message: str) -> NoReturn:
        raise Failure(EXIT_USAGE, f"{message} (see {self.prog} --help)")


# ---------------------------------------------------------------------------- arguments


def _integer(what: str, low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``low..high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


_positive = _integer("a positive integer", 1)
_seq = _integer("a seq (an integer >= 0)", 0)
_port = _integer("a port (0-65535)", 0, 65535)


def _connection_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # On the subcommands too (``show X --table t``); there a default would overwrite the value
    # given before the command, so they set nothing unless given.
    def default(value: Any) -> Any:
        return value if top else argparse.SUPPRESS

    parser.add_argument(
        "--endpoint-url",
        default=default(None),
        metavar="URL",
        help="DynamoDB endpoint, or 'aws' (default: SESSIONSTORE_ENDPOINT_URL, then "
        "AWS_ENDPOINT_URL_DYNAMODB, then an embedded engine in this process)",
    )
    parser.add_argument(
        "--table",
        default=default(DEFAULT_TABLE),
        metavar="NAME",
        help=f"table name (default {DEFAULT_TABLE!r})",
    )
    parser.add_argument(
        "--region", default=default(None), help="AWS region (default: the AWS configuration)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Look at sessionstore sessions, create the table, run the embedded engine. "
        "Also: python -m sessionstore.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _connection_options(parser, top=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = commands.add_parser(
            name,
            help=help,
            description=help,
            epilog=_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        return sub

    def session_arguments(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("session_id", metavar="SESSION_ID")
        sub.add_argument(
            "--owner", help="the session's owner (a session with an owner is not found without)"
        )
        _connection_options(sub, top=False)

    show = command("show", "a session: metadata, context and tool-call history")
    session_arguments(show)
    show.add_argument("--json", action="store_true", help="one JSON document")
    show.set_defaults(run=_show)

    context = command("context", "a session's context messages, in order")
    session_arguments(context)
    context.add_argument(
        "--after", type=_seq, metavar="SEQ", help="only the messages after this seq"
    )
    context.add_argument("--limit", type=_positive, metavar="N", help="at most N messages")
    context.add_argument("--json", action="store_true", help="JSON Lines: {seq, message}")
    context.set_defaults(run=_context)

    history = command("history", "a session's tool-call history, in order of recording")
    session_arguments(history)
    history.add_argument(
        "--after",
        metavar="TOOL_CALL_ID|TIME",
        help="only the records after this tool call, or recorded after this UTC time "
        "(e.g. 2026-01-01T12:00:00Z)",
    )
    history.add_argument("--limit", type=_positive, metavar="N", help="at most N records")
    history.add_argument("--json", action="store_true", help="JSON Lines, one record each")
    history.set_defaults(run=_history)

    create = command("create-table", "create the table if missing (idempotent)")
    _connection_options(create, top=False)
    create.add_argument("--json", action="store_true", help="one JSON document")
    create.set_defaults(run=_create_table)

    engine = command(
        "engine",
        "run the embedded DynamoDB (moto, serialized) on loopback until Ctrl-C or SIGTERM",
    )
    engine.add_argument("--port", type=_port, default=0, help="port (default: a free one)")
    engine.add_argument("--host", default="127.0.0.1", choices=_LOOPBACK, help="loopback only")
    engine.add_argument(
        "--stock-moto",
        action="store_true",
        help="do NOT serialize requests (only to demonstrate the lost updates of stock moto)",
    )
    engine.set_defaults(run=_engine)
    return parser


# ---------------------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit code (module docstring)."""
    _safe_stdout()
    try:
        args = build_parser().parse_args(argv)
        run: Callable[[argparse.Namespace], int] = args.run
        return run(args)
    except Failure as failure:
        return _fail(failure.code, failure.message)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``| head``): nothing more to say, and nothing to flush at exit.
        _silence_stdout()
        return EXIT_OK


def _fail(code: int, message: str) -> int:
    _flush_quietly(sys.stdout)
    print(f"{PROG}: error: {_one_line(message)}", file=sys.stderr, flush=True)
    return code


class _Target:
    """Where a command talks to: the store, and what error messages say about the endpoint."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.table: str = args.table
        endpoint, source = _endpoint(args.endpoint_url)
        self.embedded = endpoint is None
        kwargs: dict[str, Any] = {} if args.region is None else {"region_name": args.region}
        try:
            client = connect(endpoint, **kwargs)
        except (ImportError, RuntimeError) as exc:  # the embedded engine without moto
            raise Failure(EXIT_USAGE, f"no endpoint configured, and {exc}") from None
        except (ValueError, BotoCoreError) as exc:
            where = f"endpoint {endpoint!r}{source}" if endpoint else "the client"
            hint = " (set AWS_REGION or pass --region)" if isinstance(exc, NoRegionError) else ""
            raise Failure(EXIT_USAGE, f"{where}: {_describe(exc)}{hint}") from None
        aws = f"AWS ({client.meta.region_name})"
        self.where = aws if endpoint == "aws" else str(client.meta.endpoint_url)
        self.store = SessionStore(client, self.table, clock=SystemClock())

    def failure(self, exc: BaseException) -> Failure:
        """The one line and the exit code for an error raised while talking to DynamoDB."""
        if isinstance(exc, SessionExpired):
            return Failure(
                EXIT_NOT_FOUND,
                f"session {exc.session_id!r} expired at {_utc(exc.ttl)} (ttl {exc.ttl})",
            )
        if isinstance(exc, SessionNotFound):
            return Failure(EXIT_NOT_FOUND, f"session {exc.session_id!r} not found")
        if isinstance(exc, TableNotFound) or _client_code(exc) == "ResourceNotFoundException":
            return Failure(EXIT_USAGE, self._missing_table())
        if isinstance(exc, Unavailable):
            return Failure(EXIT_UNAVAILABLE, str(exc))
        if isinstance(exc, InvalidInput):
            return Failure(EXIT_USAGE, str(exc))
        if isinstance(exc, SessionStoreError):
            return Failure(EXIT_USAGE, f"{type(exc).__name__}: {exc}")
        if isinstance(exc, ClientError):
            code = _client_code(exc)
            unavailable = code in _THROTTLES or code in _SERVER_ERRORS
            return Failure(EXIT_UNAVAILABLE if unavailable else EXIT_USAGE, _describe(exc))
        if isinstance(exc, BotoConnectionError | HTTPClientError | TimeoutError):
            return Failure(EXIT_UNAVAILABLE, f"DynamoDB at {self.where}: {_describe(exc)}")
        return Failure(EXIT_USAGE, f"DynamoDB at {self.where}: {_describe(exc)}")

    def _missing_table(self) -> str:
        if self.embedded:
            return (
                f"table {self.table!r} not found: no endpoint is configured, so this process "
                "started an empty embedded engine; set SESSIONSTORE_ENDPOINT_URL or pass "
                "--endpoint-url (`sessionstore engine` runs a shared one)"
            )
        return (
            f"table {self.table!r} not found at {self.where} "
            f"(create it with `{PROG} create-table --table {self.table}`)"
        )


#: What talking to DynamoDB may raise: all of it becomes one line and an exit code.
_DYNAMODB_ERRORS = (SessionStoreError, ClientError, BotoCoreError, TimeoutError)


def _endpoint(given: str | None) -> tuple[str | None, str]:
    """The endpoint ``connect()`` would pick from the argument or the environment (None: the
    embedded engine), checked to be a URL or ``aws``; and where it came from, for messages."""
    endpoint = given or configured_endpoint()
    if endpoint is None or endpoint == "aws":
        return endpoint, ""
    source = "" if given else " (from the environment)"
    parsed = urlparse(endpoint)
    try:
        parsed.port  # noqa: B018 - raises ValueError for a port out of range or not a number
        good = parsed.scheme in ("http", "https") and bool(parsed.hostname)
    except ValueError:
        good = False
    if not good:
        raise Failure(
            EXIT_USAGE,
            f"bad endpoint {endpoint!r}{source}: expected http(s)://HOST[:PORT] or 'aws'",
        )
    return endpoint, source


# ---------------------------------------------------------------------------- commands


def _show(args: argparse.Namespace) -> int:
    target = _Target(args)
    store, sid, owner = target.store, args.session_id, args.owner
    out = sys.stdout
    try:
        try:
            session = store.get_session(sid, owner=owner)
        except SessionExpired as exc:
            _write_expired(out, exc, args.json)
            raise
        now_s = SystemClock().now_ms() // 1000
        if args.json:
            out.write(f'{{"session": {_dumps(_session_json(session, now_s))}, "context": [')
            _write_array(
                out,
                ({"seq": seq, "message": m} for seq, m in _messages(store, sid, owner, None)),
            )
            out.write('], "toolCalls": [')
            _write_array(out, (_record_json(r) for r in store.tool_calls(sid, owner=owner)))
            out.write("]}\n")
            return EXIT_OK
        width = _width()
        _write_fields(out, _session_fields(session, now_s), width)
        out.write("\ncontext:\n")
        _write_context(out, _messages(store, sid, owner, None), width)
        out.write("\ntool calls:\n")
        _write_history(out, store.tool_calls(sid, owner=owner), width)
        return EXIT_OK
    except _DYNAMODB_ERRORS as exc:
        raise target.failure(exc) from None


def _context(args: argparse.Namespace) -> int:
    target = _Target(args)
    try:
        rows = _messages(target.store, args.session_id, args.owner, args.after)
        rows = itertools.islice(rows, args.limit)
        if args.json:
            _write_lines(sys.stdout, ({"seq": seq, "message": m} for seq, m in rows))
        else:
            _write_context(sys.stdout, rows, _width())
        return EXIT_OK
    except _DYNAMODB_ERRORS as exc:
        raise target.failure(exc) from None


def _history(args: argparse.Namespace) -> int:
    target = _Target(args)
    after: str | None = args.after
    stamp = _as_time(after) if after is not None else None
    try:
        records = target.store.tool_calls(args.session_id, owner=args.owner)
        if after is not None:
            records = _records_after(records, after, stamp, args.session_id)
        records = itertools.islice(records, args.limit)
        if args.json:
            _write_lines(sys.stdout, (_record_json(r) for r in records))
        else:
            _write_history(sys.stdout, records, _width())
        return EXIT_OK
    except _DYNAMODB_ERRORS as exc:
        raise target.failure(exc) from None


def _create_table(args: argparse.Namespace) -> int:
    target = _Target(args)
    try:
        created = target.store.create_table()
    except _DYNAMODB_ERRORS as exc:
        raise target.failure(exc) from None
    if args.json:
        document = {"table": target.table, "endpoint": target.where, "created": created}
        sys.stdout.write(_dumps(document) + "\n")
    else:
        said = "created" if created else "already exists"
        sys.stdout.write(f"table {target.table!r} {said} at {target.where}\n")
    if target.embedded:
        print(
            f"{PROG}: note: no endpoint is configured: the table is in this process's embedded "
            "engine, gone when it exits",
            file=sys.stderr,
        )
    return EXIT_OK


def _engine(args: argparse.Namespace) -> int:
    from .local import LocalDynamoDB

    host: str = args.host
    _check_port_free(host, args.port)
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # before starting: a stop is never missed
        signal.signal(sig, lambda *_: stopped.set())
    try:
        engine = LocalDynamoDB(args.port, host=host, serialized=not args.stock_moto).start()
    except (ImportError, RuntimeError, ValueError, OSError) as exc:
        raise Failure(EXIT_USAGE, f"the embedded engine did not start: {exc}") from None
    try:
        url = f"http://{f'[{host}]' if ':' in host else host}:{engine.port}"
        # The first line is machine-readable (a parent process waits for it); the rest is
        # for people, on stderr.
        print(f"SESSIONSTORE_ENDPOINT_URL={url}", flush=True)
        print(
            f"{PROG}: embedded DynamoDB at {url} until Ctrl-C or SIGTERM; elsewhere:\n"
            f"export SESSIONSTORE_ENDPOINT_URL={url}",
            file=sys.stderr,
            flush=True,
        )
        stopped.wait()
    finally:
        engine.stop()
    return EXIT_OK


def _check_port_free(host: str, port: int) -> None:
    """moto's server binds in a thread of its own and, when it cannot, leaves ``start()``
    waiting forever; so a taken port is found here first (the same ``SO_REUSEADDR``)."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise Failure(EXIT_USAGE, f"cannot listen on {host}:{port}: {exc.strerror}") from None


# ---------------------------------------------------------------------------- reading


def _messages(
    store: SessionStore, session_id: str, owner: str | None, after: int | None
) -> Iterator[tuple[int, Any]]:
    """``(seq, message)`` as the store's reader yields them, page item by page item."""
    reader = store.context(session_id, owner=owner, after=after)
    for message in reader:
        seq = reader.position
        assert seq is not None  # set by every message handed out
        yield seq, message


def _as_time(text: str) -> str | None:
    """``--after`` as a record time (the store's 24-character form), or None for an id."""
    if _TIME_PREFIX.match(text) is None:
        return None
    try:
        return format_timestamp(parse_timestamp(text))
    except ValueError:
        raise Failure(EXIT_USAGE, f"--after {text!r}: not a UTC time") from None


def _records_after(
    records: Iterable[ToolCallRecord], after: str, stamp: str | None, session_id: str
) -> Iterator[ToolCallRecord]:
    if stamp is not None:
        yield from (r for r in records if r.recorded_at > stamp)
        return
    found = False
    for record in records:
        if found:
            yield record
        elif record.tool_call_id == after:
            found = True
    if not found:
        raise Failure(
            EXIT_NOT_FOUND, f"tool call {after!r} is not in the history of session {session_id!r}"
        )


# ---------------------------------------------------------------------------- JSON


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "))


def _session_json(session: Session, now_s: int) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "sessionId": session.session_id,
        "status": session.status.value,
        "owner": session.owner,
        "version": session.version,
        "createdAt": session.created_at,
        "updatedAt": session.updated_at,
        "ttl": session.ttl,
        "ttlUtc": _utc(session.ttl),
        "expired": session.expires_at <= now_s,
        "messageCount": session.message_count,
        "contextBytes": session.context_bytes,
        "attributes": dict(session.attributes),
    }
    if session.idle_seconds is not None:  # an idle session: when it expires unless used
        shown["idleSeconds"] = session.idle_seconds
        shown["expiresAt"] = session.expires_at
    return shown


def _record_json(record: ToolCallRecord) -> dict[str, Any]:
    return {
        "toolCallId": record.tool_call_id,
        "toolName": record.tool_name,
        "recordedAt": record.recorded_at,
        "durationMs": record.duration_ms,
        "input": record.input,
        "output": record.output,
        "ttl": record.ttl,
        "sessionId": record.session_id,
    }


def _write_array(out: IO[str], values: Iterable[Any]) -> None:
    for i, value in enumerate(values):
        out.write(("" if i == 0 else ", ") + _dumps(value))


def _write_lines(out: IO[str], values: Iterable[Any]) -> None:
    for value in values:
        out.write(json.dumps(value, separators=(",", ":")) + "\n")


def _write_expired(out: IO[str], exc: SessionExpired, as_json: bool) -> None:
    """What the store tells of an expired session: its id and ttl (it reads nothing more)."""
    if as_json:
        session = {"sessionId": exc.session_id, "ttl": exc.ttl, "ttlUtc": _utc(exc.ttl)}
        document = {"session": {**session, "expired": True}, "context": None, "toolCalls": None}
        out.write(_dumps(document) + "\n")
        return
    fields = [
        ("session", exc.session_id),
        ("status", "EXPIRED (the store reads nothing more of an expired session)"),
        ("ttl", f"{exc.ttl}  {_utc(exc.ttl)}  EXPIRED"),
    ]
    _write_fields(out, fields, _width())


# ---------------------------------------------------------------------------- text


def _session_fields(session: Session, now_s: int) -> list[tuple[str, str]]:
    left = session.ttl - now_s
    when = "EXPIRED" if left <= 0 else f"in {_span(left)}"
    fields = [
        ("session", session.session_id),
        ("status", session.status.value),
        ("owner", "-" if session.owner is None else session.owner),
        ("version", str(session.version)),
        ("created", session.created_at),
        ("updated", session.updated_at),
        ("ttl", f"{session.ttl}  {_utc(session.ttl)}  {when}"),
    ]
    if session.idle_seconds is not None:
        idle_left = session.expires_at - now_s
        idle_when = "EXPIRED" if idle_left <= 0 else f"in {_span(idle_left)} unless used"
        fields.append(
            ("idle", f"{session.idle_seconds} s: expires {_utc(session.expires_at)}  {idle_when}")
        )
    fields += [
        ("messages", f"{session.message_count}  ({session.context_bytes} bytes)"),
    ]
    raw = session.attributes.raw
    if not raw:
        fields.append(("attributes", "-"))
    for i, name in enumerate(sorted(raw)):
        fields.append(("attributes" if i == 0 else "", f"{name} = {raw[name]}"))  # JSON text
    return fields


def _write_fields(out: IO[str], fields: list[tuple[str, str]], width: int) -> None:
    key_width = max(len(key) for key, _ in fields)
    for key, value in fields:
        line = f"{key.ljust(key_width)}  {_printable(value)}"
        out.write(_clip(line, width) + "\n")


def _write_context(out: IO[str], rows: Iterable[tuple[int, Any]], width: int) -> None:
    table = _Table(out, ("seq", "message"), right=(0,), width=width)
    for seq, message in rows:
        table.add((str(seq), _compact(message)))
    table.close()


def _write_history(out: IO[str], records: Iterable[ToolCallRecord], width: int) -> None:
    headers = ("recordedAt", "toolCallId", "toolName", "duration", "isError", "input")
    table = _Table(out, headers, right=(3,), width=width)
    for record in records:
        output = record.output
        is_error = output.get("isError") if isinstance(output, dict) else None
        table.add(
            (
                record.recorded_at,
                record.tool_call_id,
                record.tool_name,
                f"{record.duration_ms} ms",
                "-" if is_error is None else _compact(is_error),
                _compact(record.input),
            )
        )
    table.close()


class _Table:
    """Plain-text columns, written as rows come: the first ``_SIZING_ROWS`` rows are held back
    to size the columns, which only widen after that. The last column is cut to ``width``."""

    def __init__(
        self, out: IO[str], headers: Sequence[str], *, right: Sequence[int], width: int
    ) -> None:
        self._out = out
        self._headers = tuple(headers)
        self._right = frozenset(right)
        self._width = width
        self._held: list[tuple[str, ...]] | None = []
        self._widths = [len(h) for h in headers]
        self._rows = 0

    def add(self, row: Sequence[str]) -> None:
        cells = tuple(_printable(cell) for cell in row)
        self._rows += 1
        if self._held is not None:
            self._held.append(cells)
            if len(self._held) >= _SIZING_ROWS:
                self._release()
            return
        self._line(cells)

    def close(self) -> None:
        if self._held is not None:
            if not self._held:
                self._out.write("  (none)\n")
                self._held = None
                return
            self._release()

    def _release(self) -> None:
        held, self._held = self._held or [], None
        for cells in held:
            self._widen(cells)
        self._line(self._headers)
        for cells in held:
            self._line(cells)

    def _widen(self, cells: Sequence[str]) -> None:
        for i, cell in enumerate(cells[:-1]):
            self._widths[i] = max(self._widths[i], len(cell))

    def _line(self, cells: Sequence[str]) -> None:
        self._widen(cells)
        parts = [
            cell.rjust(w) if i in self._right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(cells[:-1], self._widths, strict=False))
        ]
        used = sum(len(p) + 2 for p in parts)
        last = _clip(cells[-1], max(self._width - used, _MIN_LAST_COLUMN))
        self._out.write("  ".join([*parts, last]).rstrip() + "\n")


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _printable(text: str) -> str:
    """Control and format characters escaped: stored text must not drive the terminal."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _width() -> int:
    return shutil.get_terminal_size((100, 24)).columns


def _utc(epoch_s: int) -> str:
    try:
        return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return "?"


def _span(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {seconds}s"
    return f"{seconds}s"


# ---------------------------------------------------------------------------- plumbing


def _client_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, ClientError | BotoCoreError | ValueError | OSError):
        return f"{type(exc).__name__}: {text}"
    return text


def _one_line(text: str) -> str:
    return _printable(" ".join(text.split()))


def _safe_stdout() -> None:
    """Stored text in any encoding the terminal cannot show comes out escaped, not as a crash."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


def _flush_quietly(stream: IO[str]) -> None:
    with contextlib.suppress(OSError, ValueError):  # BrokenPipeError is an OSError
        stream.flush()


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
