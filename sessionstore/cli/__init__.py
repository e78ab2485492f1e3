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

One module per command (``show``, ``context``, ``history``, ``create_table``, ``engine``), so
that each reads on its own: it registers its subparser and runs it. What they share is in
``common`` (exit codes, ``Failure``, argument types), ``target`` (the endpoint, the store, and
DynamoDB's errors as one line and an exit code) and ``output`` (JSON, text tables). This module
is the entry point: the parser, ``main``, and the care of stdout.

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
import os
import sys
from collections.abc import Callable, Sequence
from typing import IO

from . import context, create_table, engine, history, show
from .common import (
    DEFAULT_TABLE,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    PROG,
    Failure,
    Parser,
    connection_options,
)
from .output import one_line

# The names ``sessionstore.cli`` had as one module, importable from the same path.
__all__ = [
    "DEFAULT_TABLE",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "PROG",
    "Failure",
    "build_parser",
    "main",
]

_EPILOG = "Exit codes:" + (__doc__ or "").split("Exit codes:", 1)[-1]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Look at sessionstore sessions, create the table, run the embedded engine. "
        "Also: python -m sessionstore.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    connection_options(parser, top=True)
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

    # In this order in --help.
    for module in (show, context, history, create_table, engine):
        module.register(command)
    return parser


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
    print(f"{PROG}: error: {one_line(message)}", file=sys.stderr, flush=True)
    return code


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
