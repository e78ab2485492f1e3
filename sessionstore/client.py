"""``connect()``: a boto3 DynamoDB client for the configured endpoint, or the embedded engine."""

from __future__ import annotations

import atexit
import os
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import boto3
import botocore.session
from botocore.config import Config

__all__ = ["configured_endpoint", "connect"]

if TYPE_CHECKING:
    from .local import LocalDynamoDB

_EMBEDDED: LocalDynamoDB | None = None
_EMBEDDED_LOCK = threading.Lock()
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
#: ``connect()``'s botocore timeouts (seconds); a ``config=`` passed to it overrides them.
CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 20
_LOADER_LOCK = threading.Lock()
_loader: Any = None  # botocore's data loader, shared by every session ``connect`` makes


def _session() -> boto3.session.Session:
    """A boto3 session of its own -- credentials, region and settings read now -- sharing one
    botocore data loader per process: the service model and endpoint data are parsed once, not
    for every client (about 0.1 s of CPU each), as the clients of one session share them. (A
    botocore data path set after the first ``connect`` of the process is not searched.)"""
    global _loader
    core = botocore.session.get_session()
    with _LOADER_LOCK:
        if _loader is None:
            _loader = core.get_component("data_loader")
        else:
            core.register_component("data_loader", _loader)
        session = boto3.session.Session(botocore_session=core)
        paths = _loader.search_paths  # each boto3 session adds its data path to the loader
        paths[:] = dict.fromkeys(paths)
    return session


def _embedded_endpoint() -> str:
    """One embedded engine per process, started on first use, stopped at exit."""
    global _EMBEDDED
    with _EMBEDDED_LOCK:
        if _EMBEDDED is None:
            from .local import LocalDynamoDB

            _EMBEDDED = LocalDynamoDB().start()
            atexit.register(_EMBEDDED.stop)
        return _EMBEDDED.endpoint_url


def configured_endpoint() -> str | None:
    """The endpoint from the environment, if any: ours first, then AWS's own variable."""
    return os.environ.get("SESSIONSTORE_ENDPOINT_URL") or os.environ.get(
        "AWS_ENDPOINT_URL_DYNAMODB"
    )


def connect(endpoint_url: str | None = None, *, max_attempts: int = 5, **client_kwargs: Any) -> Any:
    """A boto3 DynamoDB client with botocore's standard retry mode.

    Endpoint: the argument, else ``SESSIONSTORE_ENDPOINT_URL``, else ``AWS_ENDPOINT_URL_DYNAMODB``,
    else the process-wide embedded engine (reached in this process, without HTTP); the value
    ``aws`` means real DynamoDB through the default credential chain and region. Dummy region
    and credentials are supplied only for a loopback endpoint with nothing configured -- never
    for a real one.
    """
    endpoint = endpoint_url or configured_endpoint()
    # total_max_attempts counts the first attempt; botocore's "max_attempts" key does not.
    # Timeouts for DynamoDB, not botocore's 60 s each: a request botocore sent may land that
    # long after, and a context page must land while readers still wait for it (``context``).
    config = Config(
        retries={"mode": "standard", "total_max_attempts": max_attempts},
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
    )
    if "config" in client_kwargs:
        config = config.merge(client_kwargs.pop("config"))
    session = _session()
    if endpoint == "aws":  # real DynamoDB: default credential chain, region and endpoint
        return session.client("dynamodb", config=config, **client_kwargs)
    embedded = endpoint is None
    if embedded:
        endpoint = _embedded_endpoint()
    kwargs: dict[str, Any] = {"endpoint_url": endpoint, "config": config, **client_kwargs}
    if urlparse(endpoint).hostname in _LOOPBACK:
        kwargs.setdefault("region_name", session.region_name or "us-east-1")
        if session.get_credentials() is None:
            kwargs.setdefault("aws_access_key_id", "sessionstore-local")
            kwargs.setdefault("aws_secret_access_key", "sessionstore-local")
    client = session.client("dynamodb", **kwargs)
    if embedded:  # the engine runs in this process: its requests skip HTTP (engine.transport)
        from .engine.transport import attach

        attach(client)
    return client
