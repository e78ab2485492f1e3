"""``sessionstore engine``: the embedded DynamoDB on loopback, until Ctrl-C or SIGTERM.

For several processes or notebooks to share one engine: its first stdout line is
``SESSIONSTORE_ENDPOINT_URL=...`` for a parent process to read (the rest, for people, is on
stderr). It talks to no table, so it takes no connection options; ``..local`` is imported when
the engine runs, so the other commands never load it.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading

from .common import EXIT_USAGE, PROG, Command, Failure, integer

_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_port = integer("a port (0-65535)", 0, 65535)


def register(command: Command) -> None:
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
    engine.set_defaults(run=run)


def run(args: argparse.Namespace) -> None:
    from ..local import LocalDynamoDB

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
