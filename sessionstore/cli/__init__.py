"""``python -m sessionstore`` (console script ``sessionstore``): sessions from a shell.

The commands, their options and the endpoint rules (those of ``sessionstore.connect()``) are in
``--help``; one module per command registers its subparser and runs it. This module is the entry
point: the parser, ``main``, and the care of stdout. Reads page lazily: rows are printed as the
store's iterators yield them, and ``--limit`` stops the reading.

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
from collections.abc import Sequence
from typing import Any

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


def build_parser() -> argparse.ArgumentParser:
    shared: dict[str, Any] = {
        "epilog": "Exit codes:" + (__doc__ or "").split("Exit codes:", 1)[-1],
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }
    parser = Parser(
        prog=PROG,
        description="Look at sessionstore sessions, create the table, run the embedded engine. "
        "Also: python -m sessionstore.",
        **shared,
    )
    connection_options(parser, top=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help, description=help, **shared)

    # In this order in --help.
    for module in (show, context, history, create_table, engine):
        module.register(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit code (module docstring)."""
    for stream in (sys.stdout, sys.stderr):
        # Stored text in any encoding the terminal cannot show comes out escaped, not as a crash.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    try:
        args = build_parser().parse_args(argv)
        args.run(args)
        return EXIT_OK
    except Failure as failure:
        with contextlib.suppress(OSError, ValueError):  # BrokenPipeError is an OSError
            sys.stdout.flush()
        print(f"{PROG}: error: {one_line(failure.message)}", file=sys.stderr, flush=True)
        return failure.code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``| head``): nothing more to say, and nothing to flush at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_OK
