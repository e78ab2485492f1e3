"""The contenders for the same work on one engine: every commit bumps ``version`` by one.

Three kinds of work (``WORKS``), each contender doing the same thing its own way; every write
attempt is counted on the contender's own botocore client with a ``WireCounter``.

``status`` -- the source design's own operation, ``updateSessionStatus``: move a session one
step along its lifecycle (``initializing -> active -> closing -> closed``). The lifecycle allows
three moves per session, so a run walks a list of fresh sessions (created ``initializing``
before the count starts), every writer advancing each session in turn until it sees it
``closed``: every commit is a legal move and bumps the version by one, three per session, and
with several writers they race for each move. Every contender retries with the same semantics
(``status_retry``): the store's own ``RetryPolicy`` -- bounded exponential backoff with full
jitter, ``U(0, min(0.5 s, 10 ms * 2**n))`` after the n-th refusal in a row (from 0), at most
16 attempts -- between a refused write and the writer's next write to that session, whichever
side's code makes it. What each contender sends:

* ``sessionstore`` -- ``SessionStore.update_status(sid, next)``, ``next`` the status after the
  one this writer last saw (``initializing`` for a session it has not seen): a cold instance
  reads the session first (GetItem), then one UpdateItem pinned to the version of its copy; a
  refusal is retried on the version its ALL_OLD carries (one request per retry, no re-read), or
  ends the call with nothing written when another writer already made the move (the writer then
  asks for the next one, after the backoff: the source loop sleeps there too, before its
  re-read). Each writer is its own ``SessionStore`` instance, starting cold; its commits are the
  UpdateItems that succeeded in its own thread.
* ``source`` -- the source design's ``updateSessionStatus`` loop transliterated: ConsistentRead
  GetItem, UpdateItem ``SET status = :s, updatedAt = :now, version = version + 1`` on
  ``version = :v``, re-read on every conflict, with the backoff and bound above (the source
  design's own, ``50 * 2**n + U(0, 20)`` ms and ``maxRetries = 3``, is kept for the other
  works); ``:s`` is the status after the one its read returned (the source design
  writes whatever status it is given, so on a conflict it would repeat a move another writer
  made; choosing from the read keeps every commit a legal move), and a read that finds the
  session ``closed`` ends the call with nothing written.
* ``pynamodb`` -- the same loop with PynamoDB 6: ``Model.get`` (consistent), set ``status`` to
  the next one, ``Model.save()`` (its ``VersionAttribute`` adds the version condition and the
  increment), the same backoff and bound.

``update`` -- a versioned update of one small attribute (``title``) on one session:

* ``sessionstore`` -- ``SessionStore.update_attributes(sid, {"title": ...})``: no version
  condition (the change commutes), ``version + 1``; one ``TransactWriteItems`` (the metadata
  item's guards and version, the attributes item by name: the attributes are an item of their
  own, so tool calls are not billed for them), and nothing read back.
  Each writer is its own ``SessionStore`` instance (as separate MCP server instances would be),
  starting cold.
* ``source`` -- the source design's ``updateSessionStatus`` loop transliterated, writing the
  attribute instead of the status: ConsistentRead GetItem + UpdateItem on ``version = :v``,
  re-read on every conflict, backoff ``50 * 2**n + U(0, 20)`` ms, ``maxRetries = 3``.
* ``pynamodb`` -- the same get-modify-retry loop with PynamoDB 6: ``Model.get`` (consistent),
  set the attribute, ``Model.save()`` (its ``VersionAttribute`` adds the version condition and
  the increment), same backoff and retry bound as the source loop.

``append`` -- append one message to the session's context:

* ``sessionstore`` -- ``append_context(sid, [msg])``: one UpdateItem, no version condition (and
  the PutItem of its page).
* ``source`` -- the source design's ``appendContextMessages`` (``list_append`` on
  ``version = :expected``) after a ConsistentRead of the version, re-read on every conflict,
  same backoff and bound.
* ``pynamodb`` -- ``Model.get``, ``context.append(msg)``, ``Model.save()`` (version condition).

A call that gives up (source / PynamoDB after 4 attempts, sessionstore and the status work after
16) is re-issued by its caller until the writer has its commits; such calls are counted as
``gave_up``.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

import sessionstore as ss
from sessionstore import schema
from sessionstore.retry import RetryPolicy
from sessionstore.tutorial import source_design

from .counting import CONDITION_FAILED, ThreadWrites, WireCounter

#: A writer's "commit": perform one committed update; returns how many calls gave up first.
Commit = Callable[[], int]
WORKS = ("status", "update", "append")

#: The lifecycle's one legal forward move from each status (``closed`` has none).
NEXT_STATUS = {
    ss.Status.INITIALIZING.value: ss.Status.ACTIVE.value,
    ss.Status.ACTIVE.value: ss.Status.CLOSING.value,
    ss.Status.CLOSING.value: ss.Status.CLOSED.value,
}
#: Moves a session makes from ``initializing`` to ``closed``.
MOVES_PER_SESSION = len(NEXT_STATUS)


class Step(NamedTuple):
    """One call of a status writer on one session."""

    committed: bool  # this writer's own move landed (the version went up by one)
    closed: bool  # the writer now knows the session is closed: nothing left to move
    gave_up: int  # the call gave up on conflicts (re-issued by the caller)


#: A status writer: one call advancing the session ``sid`` by one move, if any is left.
Advance = Callable[[str], Step]

MAX_CALLS_PER_COMMIT = 200  # a writer's bound on re-issued calls (never reached in practice)
SOURCE_MAX_RETRIES = 3  # the source design's default


def status_retry() -> RetryPolicy:
    """The status work's retry semantics, the same for every contender: the store's own default
    policy (exponential backoff with full jitter, bounded in attempts and delay)."""
    return RetryPolicy()


def _source_backoff(attempt: int) -> None:
    """The source design's own backoff: ``50 * 2**attempt + U(0, 20)`` ms."""
    time.sleep((50 * 2**attempt + random.random() * 20) / 1000)


def _schedule(retry: RetryPolicy | None) -> tuple[int, Callable[[int], None]]:
    """Attempts and backoff of a source-style loop: ``retry``'s, or the source design's own."""
    if retry is None:
        return SOURCE_MAX_RETRIES + 1, _source_backoff
    return retry.max_attempts, retry.backoff


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

    def writer(self, session_id: str, writer_id: int, work: str) -> Commit:
        raise NotImplementedError

    def new_walk_session(self) -> str:
        """A fresh session in ``initializing``, for the ``status`` work."""
        raise NotImplementedError

    def status_writer(self, writer_id: int, retry: RetryPolicy | None = None) -> Advance:
        """``retry``: the writer's retry policy (default ``status_retry()``)."""
        raise NotImplementedError

    def version(self, session_id: str) -> int:
        raise NotImplementedError

    def status(self, session_id: str) -> str:
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


def _raw_item(client: Any, table: str, session_id: str) -> dict[str, Any]:
    item: dict[str, Any] = client.get_item(
        TableName=table, Key=schema.meta_key(session_id), ConsistentRead=True
    )["Item"]
    return item


def _raw_version(client: Any, table: str, session_id: str) -> int:
    return int(_raw_item(client, table, session_id)["version"]["N"])


def _raw_status(client: Any, table: str, session_id: str) -> str:
    status: str = _raw_item(client, table, session_id)["status"]["S"]
    return status


class SessionStoreContender(Contender):
    name = "sessionstore"
    label = (
        "sessionstore (update_status: 1 UpdateItem pinned to its copy's version, a cold "
        "instance reads first; update_attributes: 1 transaction; append: 1 UpdateItem)"
    )
    requests_per_attempt = 1

    def __init__(self, endpoint: str, table: str) -> None:
        self.table = table
        self.client = ss.connect(endpoint)
        self.setup = ss.SessionStore(self.client, table)
        self.setup.create_table()
        self.counter = WireCounter(self.client).attach()
        self.landed = ThreadWrites(self.client)

    def new_session(self) -> str:
        sid = self.setup.create_session().session_id
        self.setup.activate(sid)
        return sid

    def writer(self, session_id: str, writer_id: int, work: str) -> Commit:
        # its own (cold) instance, as a separate server instance would be
        store = ss.SessionStore(self.client, self.table)
        messages = [f"w{writer_id}"]
        n = itertools.count()

        def write() -> object:
            if work == "append":
                return store.append_context(session_id, messages)
            return store.update_attributes(session_id, {"title": f"w{writer_id}-{next(n)}"})

        def commit() -> int:
            return _gave_up_loop(write, lambda exc: isinstance(exc, ss.ConflictRetriesExhausted))

        return commit

    def new_walk_session(self) -> str:
        return self.setup.create_session().session_id

    def status_writer(self, writer_id: int, retry: RetryPolicy | None = None) -> Advance:
        policy = retry or status_retry()
        # its own (cold) instance, as a separate server instance would be; the driver backs off
        # between the retries inside one call with the same policy
        store = ss.SessionStore(self.client, self.table, retry=policy)
        seen: dict[str, ss.Status] = {}  # the status this writer last saw, per session
        streak: dict[str, int] = {}  # refusals in a row on a session, since the writer's commit

        def advance(sid: str) -> Step:
            target = ss.Status(NEXT_STATUS[seen.get(sid, ss.Status.INITIALIZING).value])
            before, refused_before = self.landed.count(), self.landed.refused()
            step: Step
            try:
                session = store.update_status(sid, target)
            except ss.InvalidTransition as exc:  # another writer moved it past ``target``
                seen[sid] = exc.current
                step = Step(False, exc.current is ss.Status.CLOSED, 0)
            except ss.ConflictRetriesExhausted:
                streak.pop(sid, None)  # a re-issued call starts over, as the source loop's does
                return Step(False, False, 1)
            else:
                seen[sid] = session.status
                committed = self.landed.count() > before
                step = Step(committed, session.status is ss.Status.CLOSED, 0)
            refused = self.landed.refused() - refused_before
            if step.committed or step.closed:
                streak.pop(sid, None)
            elif refused:
                # Another writer made the move this call asked for: back off before asking for
                # the next one, as the source loop sleeps before its re-read.
                streak[sid] = streak.get(sid, 0) + refused
                policy.backoff(streak[sid] - 1)
            return step

        return advance

    def version(self, session_id: str) -> int:
        return _raw_version(self.client, self.table, session_id)

    def status(self, session_id: str) -> str:
        return _raw_status(self.client, self.table, session_id)


def _put_source_session(client: Any, table: str, session_id: str, status: str = "active") -> None:
    """The source design's metadata item (its ``SessionMetadata`` interface)."""
    now = int(time.time())
    client.put_item(
        TableName=table,
        Item={
            "pk": {"S": schema.pk(session_id)},
            "sk": {"S": schema.META_SK},
            "version": {"N": "1"},
            "status": {"S": status},
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
    label = (
        "source design loop (GetItem + UpdateItem, re-read per conflict, 50*2^n ms; the status "
        "work: the shared full-jitter backoff)"
    )
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

    def writer(self, session_id: str, writer_id: int, work: str) -> Commit:
        n = itertools.count()

        def write() -> None:
            if work == "append":
                source_append(self.client, session_id, [f"w{writer_id}"], table=self.table)
            else:
                source_update_attribute(
                    self.client, session_id, "title", f"w{writer_id}-{next(n)}", table=self.table
                )

        def commit() -> int:
            return _gave_up_loop(write, _is_condition_failure)

        return commit

    def new_walk_session(self) -> str:
        sid = f"src-{next(self._ids):05d}"
        _put_source_session(self.client, self.table, sid, "initializing")
        return sid

    def status_writer(self, writer_id: int, retry: RetryPolicy | None = None) -> Advance:
        policy = retry or status_retry()

        def advance(sid: str) -> Step:
            try:
                wrote = source_advance_status(self.client, sid, policy, table=self.table)
            except ClientError as err:
                if _is_condition_failure(err):
                    return Step(False, False, 1)
                raise
            return Step(wrote is not None, wrote in (None, "closed"), 0)

        return advance

    def version(self, session_id: str) -> int:
        return _raw_version(self.client, self.table, session_id)

    def status(self, session_id: str) -> str:
        return _raw_status(self.client, self.table, session_id)


def source_advance_status(
    client: Any, session_id: str, retry: RetryPolicy | None = None, *, table: str
) -> str | None:
    """The source design's ``updateSessionStatus`` loop, the status it writes chosen from its
    read: read the item (consistent); ``closed``: return None, nothing written; else UpdateItem
    ``SET status = <the next status>, updatedAt, version = version + 1`` on ``version = :v``,
    re-read on a conflict after ``retry``'s backoff (None: the source design's own, 4 attempts,
    ``50 * 2**n + U(0, 20)`` ms). Returns the status written."""
    key = schema.meta_key(session_id)
    attempts, backoff = _schedule(retry)
    for attempt in range(attempts):
        item = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
        target = NEXT_STATUS.get(item["status"]["S"])
        if target is None:
            return None
        try:
            client.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET #status = :status, updatedAt = :now, #v = #v + :inc",
                ConditionExpression="#v = :expected",
                ExpressionAttributeNames={"#status": "status", "#v": "version"},
                ExpressionAttributeValues={
                    ":status": {"S": target},
                    ":now": {"S": source_design._now_iso()},
                    ":inc": {"N": "1"},
                    ":expected": item["version"],
                },
            )
            return target
        except ClientError as err:
            if _is_condition_failure(err) and attempt + 1 < attempts:
                backoff(attempt)
                continue
            raise
    raise RuntimeError("unreachable")  # pragma: no cover


def source_update_attribute(
    client: Any,
    session_id: str,
    name: str,
    value: str,
    max_retries: int = SOURCE_MAX_RETRIES,
    *,
    table: str,
) -> None:
    """The source design's ``updateSessionStatus`` loop, writing one attribute instead of the
    status: read the version (consistent), UpdateItem on ``version = :expected``, re-read on a
    conflict, backoff ``50 * 2**n + U(0, 20)`` ms."""
    key = schema.meta_key(session_id)
    for attempt in range(max_retries + 1):
        version = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["version"][
            "N"
        ]
        try:
            client.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET #a = :val, updatedAt = :now, #v = #v + :inc",
                ConditionExpression="#v = :expected",
                ExpressionAttributeNames={"#a": name, "#v": "version"},
                ExpressionAttributeValues={
                    ":val": {"S": value},
                    ":now": {"S": source_design._now_iso()},
                    ":inc": {"N": "1"},
                    ":expected": {"N": version},
                },
            )
            return
        except ClientError as err:
            if _is_condition_failure(err) and attempt < max_retries:
                time.sleep((50 * 2**attempt + random.random() * 20) / 1000)
                continue
            raise
    raise RuntimeError("unreachable")  # pragma: no cover


def source_append(
    client: Any,
    session_id: str,
    messages: list[str],
    max_retries: int = SOURCE_MAX_RETRIES,
    *,
    table: str,
) -> None:
    """The source design's ``appendContextMessages`` as its callers use it: read the version,
    append on it, re-read on a conflict; same backoff as its status loop."""
    key = schema.meta_key(session_id)
    for attempt in range(max_retries + 1):
        item = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
        try:
            source_design.append_context_messages(
                client, session_id, messages, int(item["version"]["N"]), table=table
            )
            return
        except ClientError as err:
            if _is_condition_failure(err) and attempt < max_retries:
                time.sleep((50 * 2**attempt + random.random() * 20) / 1000)
                continue
            raise
    raise RuntimeError("unreachable")  # pragma: no cover


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
        title = UnicodeAttribute(null=True)

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


def pynamodb_save(
    model: Any,
    session_id: str,
    change: Callable[[Any], None],
    max_retries: int = SOURCE_MAX_RETRIES,
) -> None:
    """Get (consistent), change the object, ``save()`` -- PynamoDB's ``VersionAttribute`` makes
    it a PutItem on ``version = :read`` with the version incremented; same loop and backoff."""
    from pynamodb.exceptions import PutError

    for attempt in range(max_retries + 1):
        item = model.get(schema.pk(session_id), schema.META_SK, consistent_read=True)
        change(item)
        item.updated_at = source_design._now_iso()
        try:
            item.save()
            return
        except PutError as err:
            if err.cause_response_code == CONDITION_FAILED and attempt < max_retries:
                time.sleep((50 * 2**attempt + random.random() * 20) / 1000)
                continue
            raise
    raise RuntimeError("unreachable")  # pragma: no cover


def pynamodb_advance_status(
    model: Any, session_id: str, retry: RetryPolicy | None = None
) -> str | None:
    """Get (consistent); ``closed``: return None, nothing written; else set ``status`` to the
    next one and ``save()`` (a PutItem on ``version = :read``, the version incremented, by its
    ``VersionAttribute``); re-read on a conflict, the same backoff as ``source_advance_status``.
    Returns the status written."""
    from pynamodb.exceptions import PutError

    attempts, backoff = _schedule(retry)
    for attempt in range(attempts):
        item = model.get(schema.pk(session_id), schema.META_SK, consistent_read=True)
        target = NEXT_STATUS.get(item.status)
        if target is None:
            return None
        item.status = target
        item.updated_at = source_design._now_iso()
        try:
            item.save()
            return target
        except PutError as err:
            if err.cause_response_code == CONDITION_FAILED and attempt + 1 < attempts:
                backoff(attempt)
                continue
            raise
    raise RuntimeError("unreachable")  # pragma: no cover


class PynamoDBContender(Contender):
    name = "pynamodb"
    label = "PynamoDB 6 (Model.get + Model.save with VersionAttribute, same loop)"
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

    def writer(self, session_id: str, writer_id: int, work: str) -> Commit:
        from pynamodb.exceptions import PutError

        n = itertools.count()

        def give_up(exc: Exception) -> bool:
            return isinstance(exc, PutError) and exc.cause_response_code == CONDITION_FAILED

        def change(item: Any) -> None:
            if work == "append":
                item.context = [*(item.context or []), f"w{writer_id}"]
            else:
                item.title = f"w{writer_id}-{next(n)}"

        def commit() -> int:
            return _gave_up_loop(lambda: pynamodb_save(self.model, session_id, change), give_up)

        return commit

    def new_walk_session(self) -> str:
        sid = f"pyn-{next(self._ids):05d}"
        _put_source_session(self._raw, self.table, sid, "initializing")
        return sid

    def status_writer(self, writer_id: int, retry: RetryPolicy | None = None) -> Advance:
        from pynamodb.exceptions import PutError

        policy = retry or status_retry()

        def advance(sid: str) -> Step:
            try:
                wrote = pynamodb_advance_status(self.model, sid, policy)
            except PutError as err:
                if err.cause_response_code == CONDITION_FAILED:
                    return Step(False, False, 1)
                raise
            return Step(wrote is not None, wrote in (None, "closed"), 0)

        return advance

    def version(self, session_id: str) -> int:
        return _raw_version(self._raw, self.table, session_id)

    def status(self, session_id: str) -> str:
        return _raw_status(self._raw, self.table, session_id)


def all_contenders(endpoint: str) -> list[Contender]:
    return [
        SessionStoreContender(endpoint, "bench-sessionstore"),
        SourceContender(endpoint, "bench-source"),
        PynamoDBContender(endpoint, "bench-pynamodb"),
    ]
