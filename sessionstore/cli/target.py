"""Where a command talks to: the endpoint, the store, and every error from DynamoDB as one line.

One place for this so that the commands cannot disagree about an endpoint or an exit code: a
command talks to DynamoDB inside ``with Target(args) as target:``, which turns whatever that
raises into a ``Failure`` -- not found (1), usage or configuration (2), unavailable (3).
"""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import urlparse

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, NoRegionError
from botocore.exceptions import ConnectionError as BotoConnectionError

from ..client import configured_endpoint, connect
from ..clock import SystemClock
from ..errors import (
    InvalidInput,
    SessionExpired,
    SessionNotFound,
    SessionStoreError,
    TableNotFound,
    Unavailable,
)
from ..store import SessionStore
from ..wire import SERVER_ERRORS, THROTTLES
from .common import EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_USAGE, PROG, Failure
from .output import utc

#: Throttling, then server errors: DynamoDB unavailable (3).
_UNAVAILABLE_CODES = THROTTLES | SERVER_ERRORS

#: What talking to DynamoDB may raise: all of it becomes one line and an exit code.
DYNAMODB_ERRORS = (SessionStoreError, ClientError, BotoCoreError, TimeoutError)


class Target:
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

    def __enter__(self) -> Target:
        return self

    def __exit__(self, _type: object, exc: object, _traceback: object) -> None:
        if isinstance(exc, DYNAMODB_ERRORS):
            raise self.failure(exc) from None

    def failure(self, exc: BaseException) -> Failure:
        """The one line and the exit code for an error raised while talking to DynamoDB."""
        if isinstance(exc, SessionExpired):
            return Failure(
                EXIT_NOT_FOUND,
                f"session {exc.session_id!r} expired at {utc(exc.ttl)} (ttl {exc.ttl})",
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
            code = EXIT_UNAVAILABLE if _client_code(exc) in _UNAVAILABLE_CODES else EXIT_USAGE
            return Failure(code, _describe(exc))
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


def _client_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, ClientError | BotoCoreError | ValueError | OSError):
        return f"{type(exc).__name__}: {text}"
    return text
