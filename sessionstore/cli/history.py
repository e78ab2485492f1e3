"""``sessionstore history SESSION_ID``: a session's tool-call history, in order of recording.

The store has no start key for the history, so ``--after`` reads the records before the one
named (or before the time given) and skips them. ``record_json`` and ``write_history`` are
also what ``show`` prints of the history.
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any

from ..clock import format_timestamp, parse_timestamp
from ..models import ToolCallRecord
from .common import EXIT_NOT_FOUND, EXIT_USAGE, Command, Failure, positive, session_arguments
from .output import compact, terminal_width, write_lines, write_table
from .target import Target

_TIME_PREFIX = re.compile(r"\d{4}-\d{2}-\d{2}T")


def register(command: Command) -> None:
    history = command("history", "a session's tool-call history, in order of recording")
    session_arguments(history)
    history.add_argument(
        "--after",
        metavar="TOOL_CALL_ID|TIME",
        help="only the records after this tool call, or recorded after this UTC time "
        "(e.g. 2026-01-01T12:00:00Z)",
    )
    history.add_argument("--limit", type=positive, metavar="N", help="at most N records")
    history.add_argument("--json", action="store_true", help="JSON Lines, one record each")
    history.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    after: str | None = args.after
    with Target(args) as target:
        stamp = _as_time(after) if after is not None else None
        records = target.store.tool_calls(args.session_id, owner=args.owner)
        if stamp is not None:
            records = (r for r in records if r.recorded_at > stamp)
        elif after is not None:
            records = _records_after(records, after, args.session_id)
        records = itertools.islice(records, args.limit)
        if args.json:
            write_lines(sys.stdout, (record_json(r) for r in records))
        else:
            write_history(sys.stdout, records, terminal_width())


def _as_time(text: str) -> str | None:
    """``--after`` as a record time (the store's 24-character form), or None for an id."""
    if _TIME_PREFIX.match(text) is None:
        return None
    try:
        return format_timestamp(parse_timestamp(text))
    except ValueError:
        raise Failure(EXIT_USAGE, f"--after {text!r}: not a UTC time") from None


def _records_after(
    records: Iterable[ToolCallRecord], after: str, session_id: str
) -> Iterator[ToolCallRecord]:
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


def record_json(record: ToolCallRecord) -> dict[str, Any]:
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


def write_history(out: IO[str], records: Iterable[ToolCallRecord], width: int) -> None:
    headers = ("recordedAt", "toolCallId", "toolName", "duration", "isError", "input")
    write_table(out, headers, map(_history_row, records), right=(3,), width=width)


def _history_row(record: ToolCallRecord) -> tuple[str, ...]:
    output = record.output
    is_error = output.get("isError") if isinstance(output, dict) else None
    return (
        record.recorded_at,
        record.tool_call_id,
        record.tool_name,
        f"{record.duration_ms} ms",
        "-" if is_error is None else compact(is_error),
        compact(record.input),
    )
