"""The contenders for "one versioned update that changes the session item", on one engine.

Every contender's commit is one conditional write that bumps ``version`` by one and changes the
item; every write attempt is counted on its own botocore client with a ``WireCounter``.

* ``sessionstore`` -- ``SessionStore.append_context(sid, [msg])``. The lifecycle forbids
  repeating a status change (active -> active is a no-op that writes nothing), so the repeated
  update is ``append_context``: it runs through the very same versioned-write machinery as
  ``update_status`` (``_versioned``: ``version = :v`` condition, increment, ring token, retry from
  ``ALL_OLD`` in one request, exponential backoff with full jitter, 10 attempts). Each writer is
  its own ``SessionStore`` instance (as separate MCP server instances would be), starting cold.
* ``source`` -- ``sessionstore.testing.source_design.update_session_status``: the source
  design's loop transliterated -- ConsistentRead GetItem + conditional UpdateItem, re-read on
  every conflict, backoff ``50 * 2**n + U(0, 20)`` ms, ``maxRetries = 3``.
* ``pynamodb`` -- the same get-update-retry loop written with PynamoDB 6 (``Model.get`` with
  ``consistent_read=True``, ``Model.update`` with a ``VersionAttribute`` condition), same
  backoff and retry bound as the source loop: it differs from ``source`` only by the library.

A call that gives up (source / PynamoDB after 4 attempts, sessionstore after 10) is re-issued
by its caller until the writer has its commits; such calls are counted as ``gave_up``.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

import sessionstore as ss
from sessionstore import schema
from sessionstore.testing import source_design

from .counting import CONDITION_FAILED, WireCounter

#: A writer's "commit": perform one committed update; returns how many calls gave up first.
Commit = Callable[[], int]

MAX_CALLS_PER_COMMIT = 200  # a writer's bound on re-issued calls (never reached in practice)
SOURCE_MAX_RETRIES = 3  # the source design's default


class Contender:
    name: str
    label: str
    #: requests in one attempt: a failed attempt wastes this many
    requests_per_attempt: int
    counter: WireCounter
    #: run only in the scenarios with several writers (a tuning variant)
    contended_only = False
    _latency: Callable[..., None] | None = None

    def set_latency(self, seconds: float) -> None:
        """Add ``seconds`` to every request on the wire (botocore ``before-send``): a
        network round trip, which the embedded engine on loopback does not have."""
        events = self.counter.client.meta.events
        if self._latency is not None:
            events.unregister("before-send.dynamodb", self._latency)
            self._latency = None
        if seconds > 0:

            def delay(**_: Any) -> None:
                time.sleep(seconds)

            self._latency = delay
            events.register("before-send.dynamodb", delay)

    def new_session(self) -> str:
        raise NotImplementedError

    def writer(self, session_id: str, writer_id: int) -> Commit:
        raise NotImplementedError

    def version(self, session_id: str) -> int:
        raise NotImplementedError


def _gave_up_loop(call: Callable[[], object], is_give_up: Callable[[Exception], bool]) -> int:
    gave_up = 0
    for _ in range(MAX_CALLS_PER_COMMIT):
        try:
            call()
            return gave_up
        except Exception as exc:
            if not is_give_up(exc):
                raise
            gave_up += 1
    raise RuntimeError(f"no commit after {MAX_CALLS_PER_COMMIT} calls")


def _raw_version(client: Any, table: str, session_id: str) -> int:
    item = client.get_item(TableName=table, Key=schema.meta_key(session_id), ConsistentRead=True)[
        "Item"
    ]
    return int(item["version"]["N"])


class SessionStoreContender(Contender):
    name = "sessionstore"
    label = "sessionstore (append_context: versioned write, retry from ALL_OLD)"
    requests_per_attempt = 1

    def __init__(self, endpoint: str, table: str, *, base_delay: float | None = None) -> None:
        if base_delay is not None:  # a tuning variant: same store, slower first backoff
            self.name = f"sessionstore-{base_delay * 1000:.0f}ms"
            self.label = (
                f"sessionstore with RetryPolicy(base_delay={base_delay * 1000:.0f} ms)"
                " -- a tuning variant, contended runs only"
            )
            self.contended_only = True
        self._retry_base = base_delay
        self.table = table
        self.client = ss.connect(endpoint)
        self.setup = ss.SessionStore(self.client, table)
        self.setup.create_table()
        self.counter = WireCounter(self.client).attach()

    def new_session(self) -> str:
        sid = self.setup.create_session().session_id
        self.setup.activate(sid)
        return sid

    def writer(self, session_id: str, writer_id: int) -> Commit:
        retry = (
            ss.RetryPolicy(base_delay=self._retry_base) if self._retry_base is not None else None
        )
        # its own (cold) version hint, as a separate server instance would have
        store = ss.SessionStore(self.client, self.table, retry=retry)
        messages = [f"w{writer_id}"]

        def commit() -> int:
            return _gave_up_loop(
                lambda: store.append_context(session_id, messages),
                lambda exc: isinstance(exc, ss.ConflictRetriesExhausted),
            )

        return commit

    def version(self, session_id: str) -> int:
        return _raw_version(self.client, self.table, session_id)


def _put_source_session(client: Any, table: str, session_id: str) -> None:
    """The source design's metadata item (its ``SessionMetadata`` interface)."""
    now = int(time.time())
    client.put_item(
        TableName=table,
        Item={
            "pk": {"S": schema.pk(session_id)},
            "sk": {"S": schema.META_SK},
            "version": {"N": "1"},
            "status": {"S": "active"},
            "context": {"L": []},
            "updatedAt": {"S": source_design._now_iso()},
            "ttl": {"N": str(now + 86400)},
        },
    )


def _is_condition_failure(exc: Exception) -> bool:
    return (
        isinstance(exc, ClientError)
        and exc.response.get("Error", {}).get("Code") == CONDITION_FAILED
    )


class SourceContender(Contender):
    name = "source"
    label = "source design loop (GetItem + UpdateItem, re-read per conflict, 50*2^n ms)"
    requests_per_attempt = 2

    def __init__(self, endpoint: str, table: str) -> None:
        self.table = table
        self.client = ss.connect(endpoint)
        ss.SessionStore(self.client, table).create_table()
        self.counter = WireCounter(self.client).attach()
        self._ids = itertools.count(1)

    def new_session(self) -> str:
        sid = f"src-{next(self._ids):05d}"
        _put_source_session(self.client, self.table, sid)
        return sid

    def writer(self, session_id: str, writer_id: int) -> Commit:
        def commit() -> int:
            return _gave_up_loop(
                lambda: source_design.update_session_status(
                    self.client, session_id, "active", SOURCE_MAX_RETRIES, table=self.table
                ),
                _is_condition_failure,
            )

        return commit

    def version(self, session_id: str) -> int:
        return _raw_version(self.client, self.table, session_id)


def make_pynamodb_model(endpoint: str, table: str) -> Any:
    """A PynamoDB model of the source design's metadata item, bound to ``endpoint``."""
    from pynamodb.attributes import (
        ListAttribute,
        NumberAttribute,
        UnicodeAttribute,
        VersionAttribute,
    )
    from pynamodb.models import Model

    class SessionMetadata(Model):
        class Meta:
            table_name = table
            host = endpoint
            region = "us-east-1"
            aws_access_key_id = "sessionstore-local"
            aws_secret_access_key = "sessionstore-local"

        pk = UnicodeAttribute(hash_key=True)
        sk = UnicodeAttribute(range_key=True)
        version = VersionAttribute()
        status = UnicodeAttribute()
        context = ListAttribute(null=True)  # type: ignore[var-annotated]
        updated_at = UnicodeAttribute(attr_name="updatedAt")
        ttl = NumberAttribute()

    return SessionMetadata


def pynamodb_update_status(
    model: Any, session_id: str, new_status: str, max_retries: int = SOURCE_MAX_RETRIES
) -> None:
    """The source design's loop, written with PynamoDB: read (consistent), ``update`` with the
    ``VersionAttribute`` condition, re-read on a conflict, same backoff."""
    from pynamodb.exceptions import UpdateError

    for attempt in range(max_retries + 1):
        item = model.get(schema.pk(session_id), schema.META_SK, consistent_read=True)
        try:
            item.update(
                actions=[
                    model.status.set(new_status),
                    model.updated_at.set(source_design._now_iso()),
                ]
            )
            return
        except UpdateError as err:
            if err.cause_response_code == CONDITION_FAILED and attempt < max_retries:
                time.sleep((50 * 2**attempt + random.random() * 20) / 1000)
                continue
            raise
    raise RuntimeError("unreachable")  # pragma: no cover


class PynamoDBContender(Contender):
    name = "pynamodb"
    label = "PynamoDB 6 (Model.get + Model.update with VersionAttribute, same loop)"
    requests_per_attempt = 2

    def __init__(self, endpoint: str, table: str) -> None:
        self.table = table
        raw = ss.connect(endpoint)
        ss.SessionStore(raw, table).create_table()
        self._raw = raw
        self.model = make_pynamodb_model(endpoint, table)
        botocore_client = self.model._get_connection().connection.client
        self.counter = WireCounter(botocore_client).attach()
        self._ids = itertools.count(1)

    def new_session(self) -> str:
        sid = f"pyn-{next(self._ids):05d}"
        _put_source_session(self._raw, self.table, sid)
        return sid

    def writer(self, session_id: str, writer_id: int) -> Commit:
        from pynamodb.exceptions import UpdateError

        def give_up(exc: Exception) -> bool:
            return isinstance(exc, UpdateError) and exc.cause_response_code == CONDITION_FAILED

        def commit() -> int:
            return _gave_up_loop(
                lambda: pynamodb_update_status(self.model, session_id, "active"), give_up
            )

        return commit

    def version(self, session_id: str) -> int:
        return _raw_version(self._raw, self.table, session_id)


def all_contenders(endpoint: str) -> list[Contender]:
    return [
        SessionStoreContender(endpoint, "bench-sessionstore"),
        SourceContender(endpoint, "bench-source"),
        PynamoDBContender(endpoint, "bench-pynamodb"),
        SessionStoreContender(endpoint, "bench-sessionstore", base_delay=0.05),
    ]
