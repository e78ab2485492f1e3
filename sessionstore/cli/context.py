"""``sessionstore context SESSION_ID``: a session's context messages, in order.

``messages`` and ``write_context`` are also what ``show`` prints under ``context:``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterable, Iterator
from typing import IO, Any

from ..store import SessionStore
from .common import Command, integer, positive, session_arguments
from .output import compact, terminal_width, write_lines, write_table
from .target import Target

_seq = integer("a seq (an integer >= 0)", 0)


def register(command: Command) -> None:
    context = command("context", "a session's context messages, in order")
    session_arguments(context)
    context.add_argument(
        "--after", type=_seq, metavar="SEQ", help="only the messages after this seq"
    )
    context.add_argument("--limit", type=positive, metavar="N", help="at most N messages")
    context.add_argument("--json", action="store_true", help="JSON Lines: {seq, message}")
    context.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    with Target(args) as target:
        rows = messages(target.store, args.session_id, args.owner, args.after)
        rows = itertools.islice(rows, args.limit)
        if args.json:
            write_lines(sys.stdout, ({"seq": seq, "message": m} for seq, m in rows))
        else:
            write_context(sys.stdout, rows, terminal_width())


def messages(
    store: SessionStore, session_id: str, owner: str | None, after: int | None
) -> Iterator[tuple[int, Any]]:
    """``(seq, message)`` as the store's reader yields them, page item by page item."""
    reader = store.context(session_id, owner=owner, after=after)
    for message in reader:
        seq = reader.position
        assert seq is not None  # set by every message handed out
        yield seq, message


def write_context(out: IO[str], rows: Iterable[tuple[int, Any]], width: int) -> None:
    cells = ((str(seq), compact(message)) for seq, message in rows)
    write_table(out, ("seq", "message"), cells, right=(0,), width=width)
