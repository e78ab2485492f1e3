"""What every command shares: the exit codes, ``Failure``, and the argument parsing.

A command registers its subparser with the helpers here and ends a failed run by raising
``Failure``, which ``main`` turns into the one error line and the exit code.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from typing import NoReturn

from ..store import SessionStore

PROG = "sessionstore"
EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_INTERRUPTED = 130

#: The store's own default table name, so the two cannot drift apart.
DEFAULT_TABLE: str = str(inspect.signature(SessionStore).parameters["table_name"].default)

#: ``command(name, help)``: a new subparser, what ``build_parser`` gives each ``register``.
Command = Callable[[str, str], argparse.ArgumentParser]


class Failure(Exception):
    """Ends the command: ``message`` on stderr, exit ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Parser(argparse.ArgumentParser):
    """argparse with its usage errors as one line (``sessionstore: error: ...``), exit 2."""

    def error(self, message: str) -> NoReturn:
        raise Failure(EXIT_USAGE, f"{message} (see {self.prog} --help)")


def integer(what: str, low: int, high: int | None = None) -> Callable[[str], int]:
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


positive = integer("a positive integer", 1)


def connection_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    # On the subcommands too (``show X --table t``); there a default would overwrite the value
    # given before the command, so they set nothing unless given.
    unset = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--endpoint-url",
        default=unset,
        metavar="URL",
        help="DynamoDB endpoint, or 'aws' (default: SESSIONSTORE_ENDPOINT_URL, then "
        "AWS_ENDPOINT_URL_DYNAMODB, then an embedded engine in this process)",
    )
    parser.add_argument(
        "--table",
        default=DEFAULT_TABLE if top else unset,
        metavar="NAME",
        help=f"table name (default {DEFAULT_TABLE!r})",
    )
    parser.add_argument(
        "--region", default=unset, help="AWS region (default: the AWS configuration)"
    )


def session_arguments(sub: argparse.ArgumentParser) -> None:
    """What ``show``, ``context`` and ``history`` take first: the session and where it is."""
    sub.add_argument("session_id", metavar="SESSION_ID")
    sub.add_argument(
        "--owner", help="the session's owner (a session with an owner is not found without)"
    )
    connection_options(sub, top=False)
