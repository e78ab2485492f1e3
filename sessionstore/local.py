"""The embedded DynamoDB: moto's server on 127.0.0.1, patched to keep DynamoDB's promises.

Stock moto is not atomic under concurrency (moto 5.2.5: 8 threads doing optimistic-locking
increments lost 5-58 of 400 acknowledged updates), so one process-wide lock serializes
``DynamoHandler.call_action``; and it refuses items by its own size count, so every engine sizes
them as ``sizing.item_size`` does. README, "The embedded engine, made honest", says why.

    with LocalDynamoDB() as engine:
        client = sessionstore.connect(engine.endpoint_url)

``python -m sessionstore engine [--port N]`` runs one for several processes or notebooks.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from .engine import backup as engine_backup
from .sizing import MAX_ITEM_BYTES, number_size, text_size, value_size

__all__ = ["LocalDynamoDB"]

_LOCK = threading.RLock()
_PATCHED: set[str] = set()
#: The recursion limit while moto handles a DynamoDB request (see ``parse_long_expressions``).
MOTO_RECURSION_LIMIT = 20_000
_DEPTH_LOCK = threading.Lock()
_deep_calls = 0
_saved_limit = 0
#: Set while moto builds an item attribute by attribute: sized once, when it is whole.
_BUILDING: ContextVar[bool] = ContextVar("sessionstore_moto_building", default=False)


def _once(patch: Callable[[], None]) -> Callable[[], None]:
    """``patch``, applied at most once per process (moto's classes are patched in place)."""

    @functools.wraps(patch)
    def apply() -> None:
        with _LOCK:
            if patch.__name__ not in _PATCHED:
                patch()
                _PATCHED.add(patch.__name__)

    return apply


@_once
def serialize_moto() -> None:
    """Make every DynamoDB request moto handles in this process run alone. Idempotent."""
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        with _LOCK:
            return original(self)

    DynamoHandler.call_action = call_action  # type: ignore[method-assign]


@_once
def parse_long_expressions() -> None:
    """Let moto take every expression DynamoDB takes (up to 4 KB). Idempotent.

    moto walks an UpdateExpression's tree recursively, a level per action: past ~150 ``SET``
    actions it met Python's default recursion limit (a 500 where DynamoDB answers). So while moto
    handles a request the limit is at least ``MOTO_RECURSION_LIMIT``, set back when none is in
    moto unless changed meanwhile. Python frames, not C stack: 3.11 runs them in one C frame.
    """
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action

    def call_action(self: Any) -> Any:
        global _deep_calls, _saved_limit
        with _DEPTH_LOCK:
            if _deep_calls == 0:
                _saved_limit = sys.getrecursionlimit()
                sys.setrecursionlimit(max(_saved_limit, MOTO_RECURSION_LIMIT))
            _deep_calls += 1
        try:
            return original(self)
        finally:
            with _DEPTH_LOCK:
                _deep_calls -= 1
                raised = max(_saved_limit, MOTO_RECURSION_LIMIT)
                if _deep_calls == 0 and sys.getrecursionlimit() == raised:
                    sys.setrecursionlimit(_saved_limit)

    DynamoHandler.call_action = call_action  # type: ignore[method-assign]


def _moto_value_size(value: Any) -> int:
    """DynamoDB's size of one of moto's attribute values (a ``DynamoType``: lists and maps hold
    ``DynamoType`` elements, everything else the wire's own data)."""
    kind = getattr(value, "type", None)
    if kind is None:  # not a DynamoType: a wire value, or something moto made up
        return value_size(value) if isinstance(value, dict) else text_size(str(value))
    data = value.value
    if kind == "S" and type(data) is str:  # the common kinds first, as ``value_size`` counts them
        return text_size(data)
    if kind == "N" and type(data) is str:
        return number_size(data)
    if kind == "L":
        return 3 + sum(_moto_value_size(v) + 1 for v in data)
    if kind == "M":
        return 3 + sum(text_size(k) + _moto_value_size(v) + 1 for k, v in data.items())
    return value_size({kind: data})


def _moto_item_size(attrs: dict[str, Any], skip: str | None = None) -> int:
    size = 0
    for name, value in attrs.items():
        if name != skip:
            size += text_size(name) + _moto_value_size(value)
    return size


@_once
def size_items_like_dynamodb() -> None:
    """Make moto (in this process) refuse an item over DynamoDB's 409,600 bytes as DynamoDB
    counts them (``sessionstore.sizing``), not over its own 405,000 of its own count. Idempotent.

    moto checks in ``LimitedSizeDict.__setitem__`` (as an item is built or an update sets a
    top-level attribute), with DynamoDB's messages: only the count and the limit change, and a
    new item is sized once, whole, not once per attribute. An update expression's item too is
    sized once, after all its actions (nested ones included), not once per top-level ``SET``
    (which re-walked the item each time: quadratic in actions); an update refused, for its size
    or anything else, leaves the item as it was (moto left the actions before the refusal done).
    """
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models import dynamo_type
    from moto.dynamodb.parsing import executors

    limited: Any = dynamo_type.LimitedSizeDict
    item_class: Any = dynamo_type.Item
    build_item = item_class.__init__

    def setitem(self: dict[str, Any], key: str, value: Any) -> None:
        if not _BUILDING.get():
            size = text_size(key) + _moto_value_size(value) + _moto_item_size(self, key)
            if size > MAX_ITEM_BYTES:
                raise ItemSizeTooLarge
        dict.__setitem__(self, key, value)

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        building = _BUILDING.set(True)
        try:
            build_item(self, *args, **kwargs)
        finally:
            _BUILDING.reset(building)
        if _moto_item_size(self.attrs) > MAX_ITEM_BYTES:
            raise ItemSizeTooLarge

    runner: Any = executors.UpdateExpressionExecutor
    run_actions = runner.execute

    def execute(self: Any, node: Any = None) -> None:
        if node is not None:  # moto's recursion into the tree
            run_actions(self, node)
            return
        attrs = self.item.attrs
        saved = engine_backup.before_update(
            self.update_ast.children or (), attrs, self.expression_attribute_names
        )
        building = _BUILDING.set(True)
        try:
            run_actions(self)
            if _moto_item_size(attrs) > MAX_ITEM_BYTES:
                raise ItemSizeTooLarge
        except BaseException:
            dict.clear(attrs)
            dict.update(attrs, saved)
            raise
        finally:
            _BUILDING.reset(building)
        return None

    limited.__setitem__ = setitem
    item_class.__init__ = init
    runner.execute = execute


@_once
def transactions_by_item() -> None:
    """Make a TransactWriteItems cost what its items cost, not what the table holds. Idempotent;
    only for a serialized engine (``serialize_moto``): the request must run alone.

    moto 5 backs up each table a transaction names with ``copy.deepcopy`` of the whole table,
    once per action, to put it back if the transaction is cancelled: every transaction -- each
    MCP tool call's claim -- got slower as the table grew (a few thousand items: tens of ms).
    Here the backup is of the items the actions name, and of how far each named table's stream
    went (the whole-table copy held the stream too: a cancelled transaction leaves no stream
    records); an item's backup is ``engine.backup``'s, not a copy of it whole; moto's copies of a
    table are the table. A table is found as moto's actions find it, by name or by ARN, so a
    write to a table named by its ARN is put back too.
    """
    import copy
    from types import SimpleNamespace

    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    original = models.DynamoDBBackend.transact_write_items
    backing_up = ContextVar("sessionstore_moto_transaction", default=False)

    def deepcopy(value: Any, memo: Any = None) -> Any:
        if backing_up.get() and isinstance(value, Table):
            return value  # the items it will write are backed up below instead
        return copy.deepcopy(value, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        # (id(table), hash key, range key) -> (table, hash key, range key, item, its backup):
        # one backup per item, however many actions name it (by name and by ARN, say).
        saved: dict[tuple[int, Any, Any], tuple[Any, Any, Any, Any, Any]] = {}
        # id(shard) -> (shard, its list of records, how many it held): put back by truncation.
        streams: dict[int, tuple[Any, list[Any], int]] = {}
        for action in transact_items:
            op: dict[str, Any] = next(iter(action.values()), {})
            try:  # an unknown table or an invalid key: moto reports it
                table = self.get_table(op["TableName"])  # a name or an ARN
            except Exception:
                continue
            shard = table.stream_shard
            if shard is not None and id(shard) not in streams:
                streams[id(shard)] = (shard, shard.items, len(shard.items))
            try:
                hash_key, range_key = self.get_keys_value(table, op.get("Key") or op["Item"])
            except Exception:
                continue
            old = table.get_item(hash_key, range_key)
            place = (id(table), hash_key, range_key)
            attrs = None if old is None else engine_backup.before_action(action, old.attrs)
            if old is not None and (place in saved or attrs is None):  # named twice: whole
                attrs = engine_backup.copied(old.attrs)
            saved[place] = (table, hash_key, range_key, old, attrs)
        token = backing_up.set(True)
        try:
            original(self, transact_items)
        except BaseException:
            for table, hash_key, range_key, old, attrs in saved.values():
                items = table.items[hash_key] if range_key is not None else table.items
                slot = range_key if range_key is not None else hash_key
                if old is None:
                    items.pop(slot, None)
                else:
                    dict.clear(old.attrs)  # the item object itself, its attributes as they were
                    dict.update(old.attrs, attrs)
                    items[slot] = old
            for shard, records, count in streams.values():
                del records[count:]
                # A Lambda event source mapping swaps in a new list once it took the records.
                shard.items = records
            raise
        finally:
            backing_up.reset(token)

    models.copy = SimpleNamespace(deepcopy=deepcopy)  # type: ignore[attr-defined,assignment]
    models.DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


@_once
def answer_like_dynamodb() -> None:
    """Make moto answer as DynamoDB does: a malformed request is a 400 ValidationException with
    DynamoDB's message, never a 500 (``engine.checks``); a repeat of a ``TransactWriteItems``
    under its ``ClientRequestToken`` is not applied again (``engine.tokens``). Idempotent."""
    from .engine import checks as engine_checks
    from .engine import tokens as engine_tokens

    engine_tokens.install()  # inside the checks: a malformed request is refused first
    engine_checks.install()


@_once
def answer_quickly() -> None:
    """Parse each expression text once, not per request (``engine.cache``); copy an item only
    where the copy is read (``engine.backup``). Idempotent."""
    from .engine import cache as engine_cache

    engine_cache.install()
    engine_backup.install()


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
            transactions_by_item()
        size_items_like_dynamodb()
        parse_long_expressions()
        answer_like_dynamodb()
        answer_quickly()
        # werkzeug logs one line per request on stderr; nbval compares stderr.
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
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

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
