"""The embedded DynamoDB: moto's server on 127.0.0.1, with every DynamoDB request serialized.

Stock moto is not atomic under concurrency: measured with moto 5.2.5, 8 threads doing
optimistic-locking increments lost 5-58 of 400 acknowledged updates. DynamoDB promises that each
request on an item is atomic, so we give moto that promise with one process-wide lock around
``DynamoHandler.call_action``. Concurrency stays where it matters -- in the clients.

    with LocalDynamoDB() as engine:
        client = sessionstore.connect(engine.endpoint_url)

``python -m sessionstore engine [--port N]`` runs one for several processes or notebooks
(``python -m sessionstore.local`` still does, deprecated).
"""

from __future__ import annotations

import logging
import sys
import threading
from types import TracebackType
from typing import Any

_LOCK = threading.RLock()
_PATCHED = False


def serialize_moto() -> None:
    """Make every DynamoDB request moto handles in this process run alone. Idempotent."""
    global _PATCHED
    with _LOCK:
        if _PATCHED:
            return
        from moto.dynamodb.responses import DynamoHandler

        original = DynamoHandler.call_action

        def call_action(self: Any) -> Any:
            with _LOCK:
                return original(self)

        DynamoHandler.call_action = call_action  # type: ignore[method-assign]
        _PATCHED = True


def _quiet() -> None:
    # werkzeug logs one line per request on stderr; nbval compares stderr.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)


class LocalDynamoDB:
    """moto's DynamoDB on 127.0.0.1 (a free port unless given), every request serialized."""

    def __init__(self, port: int = 0, *, host: str = "127.0.0.1", serialized: bool = True) -> None:
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("the embedded engine listens on loopback only")
        self._serialized = serialized
        self._host = host
        self._port = port
        self._server: Any = None

    def start(self) -> LocalDynamoDB:
        if self._server is not None:
            return self
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise RuntimeError(
                "the embedded engine needs moto: pip install 'sessionstore[local]'"
            ) from exc
        if self._serialized:
            serialize_moto()
        _quiet()
        server = ThreadedMotoServer(ip_address=self._host, port=self._port, verbose=False)
        server.start()
        self._server = server
        return self

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("LocalDynamoDB is not running")
        return int(self._server.get_host_and_port()[1])

    @property
    def endpoint_url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> LocalDynamoDB:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Deprecated: ``python -m sessionstore engine`` (``sessionstore.cli``), which this runs."""
    from .cli import main as cli_main

    print(
        "sessionstore: note: `python -m sessionstore.local` is deprecated; "
        "use `python -m sessionstore engine`",
        file=sys.stderr,
        flush=True,
    )
    return cli_main(["engine", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
