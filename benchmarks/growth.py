"""Phase 4: what an append costs as the context grows, and what loading a history costs.

Computed with ``sessionstore.sizing`` (DynamoDB's item-size and capacity rules); moto's own
``ConsumedCapacity`` is flat and useless here. An UpdateItem is billed on the larger of the item
before and after: 1 WCU per started KB.

* **ours**: the metadata item exactly as the store writes it (captured from the engine after the
  token ring is full), each message stored as canonical JSON text; ``append_context`` refuses
  with ``ItemTooLarge`` once ``contextBytes + added > item_size_limit - METADATA_OVERHEAD``.
* **source**: the source design's metadata item (its ``SessionMetadata`` interface), each
  message a native DynamoDB map; nothing guards the size, so real DynamoDB refuses the update
  whose result passes 409,600 B (a ValidationException -- moto already refuses near 200 KB).

Loading a session: one Query (``pk = session#id``) returns the metadata item and the N tool-call
records, 1 MB per page, each page billed on the summed size of its items rounded up to 4 KB
(strongly consistent; eventually consistent is half).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from boto3.dynamodb.types import TypeSerializer

import sessionstore as ss
from sessionstore import codec, schema, sizing
from sessionstore.clock import format_timestamp
from sessionstore.store import METADATA_OVERHEAD

_SER = TypeSerializer()
PAGE_BYTES = 1_048_576

#: a typical chat message (about 0.5 KB)
GROWTH_MESSAGE = {
    "role": "assistant",
    "content": (
        "The session store keeps one metadata item per session; every append rewrites "
        "it, so the cost of an append follows the size of the whole item. "
    )
    * 3,
}
TOOL_INPUT = {"query": "dynamodb optimistic locking", "limit": 5, "filters": {"lang": "en"}}
TOOL_OUTPUT = {
    "hits": [
        {"title": f"result {i}", "score": 0.9 - i / 10, "url": f"https://e/{i}"} for i in range(3)
    ]
}
CHECKPOINTS = (1, 10, 50, 100, 200, 400, 600)


@dataclass
class Growth:
    design: str
    message_bytes: int  # one message as stored (element size inside the list)
    base_bytes: int  # the metadata item with an empty context
    max_messages: int  # the last append that is accepted
    refused_at_bytes: int  # item size the refused append would have produced
    limit: str
    last_item_bytes: int
    wcu_first: int
    wcu_last: int
    wcu_total: int
    series: list[tuple[int, int, int]] = field(default_factory=list)  # (n, item bytes, WCU)

    def wcu_at(self, n: int) -> int | None:
        for m, _size, wcu in self.series:
            if m == n:
                return wcu
        return None


@dataclass
class Load:
    records: int
    ours_bytes: int
    ours_pages: int
    ours_rcu: float
    source_bytes: int
    source_pages: int
    source_rcu: float


def _ours_base(endpoint: str) -> dict[str, Any]:
    """The metadata item as the store writes it, after 16 versioned writes (ring full)."""
    client = ss.connect(endpoint)
    store = ss.SessionStore(client, "bench-growth")
    store.create_table()
    sid = store.create_session(owner="alice").session_id
    store.activate(sid, owner="alice")
    for i in range(schema.RING_SIZE):
        store.append_context(sid, [f"m{i}"], owner="alice")
    item: dict[str, Any] = client.get_item(
        TableName="bench-growth", Key=schema.meta_key(sid), ConsistentRead=True
    )["Item"]
    return item


def _source_base() -> dict[str, Any]:
    return {
        "pk": {"S": schema.pk("0" * 32)},
        "sk": {"S": schema.META_SK},
        "version": {"N": "1"},
        "status": {"S": "active"},
        "context": {"L": []},
        "updatedAt": {"S": "2026-01-01T12:00:00.000Z"},
        "ttl": {"N": "1767355200"},
    }


def _series(
    design: str, size_of: Any, element: int, max_n: int, refused_size: int, limit: str
) -> Growth:
    series: list[tuple[int, int, int]] = []
    total = 0
    previous = size_of(0)
    for n in range(1, max_n + 1):
        size = size_of(n)
        wcu = sizing.write_units(max(previous, size))
        total += wcu
        series.append((n, size, wcu))
        previous = size
    return Growth(
        design=design,
        message_bytes=element,
        base_bytes=size_of(0),
        max_messages=max_n,
        refused_at_bytes=refused_size,
        limit=limit,
        last_item_bytes=series[-1][1],
        wcu_first=series[0][2],
        wcu_last=series[-1][2],
        wcu_total=total,
        series=series,
    )


def context_growth(base: dict[str, Any], *, message: Any = GROWTH_MESSAGE) -> tuple[Growth, Growth]:
    """``base``: our metadata item as stored (see ``_ours_base``)."""
    # ours: JSON text elements; contextBytes tracks the list's own size
    text = codec.encode(message)
    element = sizing.value_size({"S": text}) + 1
    empty_list = sizing.value_size({"L": []})
    rest = {k: v for k, v in base.items() if k not in ("context", "contextBytes")}
    rest_bytes = sizing.item_size(rest)
    limit = sizing.MAX_ITEM_BYTES
    budget = limit - METADATA_OVERHEAD

    def ours_size(n: int) -> int:
        list_bytes = empty_list + n * element
        return (
            rest_bytes
            + len(b"context")
            + list_bytes
            + len(b"contextBytes")
            + sizing.number_size(list_bytes)
        )

    ours_max = (budget - empty_list) // element  # contextBytes + added <= budget
    # check the closed form against the real rule on a built item
    built = dict(
        rest, context={"L": [{"S": text}] * 3}, contextBytes={"N": str(empty_list + 3 * element)}
    )
    assert sizing.item_size(built) == ours_size(3), "size formula drifted from sizing.item_size"
    ours = _series(
        "sessionstore",
        ours_size,
        element,
        ours_max,
        ours_size(ours_max + 1),
        f"ItemTooLarge: contextBytes + added > {limit:,} - METADATA_OVERHEAD "
        f"({METADATA_OVERHEAD:,} B reserved)",
    )

    # source: native maps, no guard; the version number grows with the appends
    src = _source_base()
    native = _SER.serialize(message)
    src_element = sizing.value_size(native) + 1
    src_rest = sizing.item_size({k: v for k, v in src.items() if k not in ("context", "version")})

    def source_size(n: int) -> int:
        return (
            src_rest
            + len(b"context")
            + empty_list
            + n * src_element
            + len(b"version")
            + sizing.number_size(n + 1)
        )

    built_src = dict(src, context={"L": [native] * 3}, version={"N": "4"})
    assert sizing.item_size(built_src) == source_size(3)
    src_max = 0
    while source_size(src_max + 1) <= limit:
        src_max += 1
        if src_max > 1_000_000:  # bounded: a message of a few bytes still ends well before
            break
    source = _series(
        "source design",
        source_size,
        src_element,
        src_max,
        source_size(src_max + 1),
        f"none in the code; DynamoDB refuses the update past {limit:,} B",
    )
    return ours, source


def _ours_record(session_id: str, n: int) -> dict[str, Any]:
    at = format_timestamp(1_767_268_800_000 + n)
    call_id = f"call-{n:06d}"
    return {
        k: _SER.serialize(v)
        for k, v in {
            "pk": schema.pk(session_id),
            "sk": schema.tool_sk(at, call_id),
            "sessionId": session_id,
            "toolCallId": call_id,
            "toolName": "search",
            "input": codec.encode(TOOL_INPUT),
            "output": codec.encode(TOOL_OUTPUT),
            "durationMs": 42,
            "recordedAt": at,
            "ttl": 1_767_355_200,
        }.items()
    }


def _source_record(session_id: str, n: int) -> dict[str, Any]:
    at = format_timestamp(1_767_268_800_000 + n)
    call_id = f"call-{n:06d}"
    from decimal import Decimal

    def dec(value: Any) -> Any:  # the source's DocumentClient marshals numbers natively
        if isinstance(value, float):
            return Decimal(str(value))
        if isinstance(value, dict):
            return {k: dec(v) for k, v in value.items()}
        if isinstance(value, list):
            return [dec(v) for v in value]
        return value

    return {
        k: _SER.serialize(v)
        for k, v in {
            "pk": schema.pk(session_id),
            "sk": f"tool#{at}#{call_id}",
            "toolCallId": call_id,
            "toolName": "search",
            "input": dec(TOOL_INPUT),
            "output": dec(TOOL_OUTPUT),
            "durationMs": 42,
            "recordedAt": at,
            "ttl": 1_767_355_200,
        }.items()
    }


def _query_cost(meta_bytes: int, record_bytes: int, n: int) -> tuple[int, int, float]:
    """(bytes, pages, RCU) of one paginated Query returning the metadata and n records."""
    sizes = [meta_bytes] + [record_bytes] * n
    pages, rcu, page = 0, 0.0, 0
    for size in sizes:
        if page and page + size > PAGE_BYTES:
            rcu += sizing.read_units(page)
            pages += 1
            page = 0
        page += size
    rcu += sizing.read_units(page)
    pages += 1
    return sum(sizes), pages, rcu


def load_costs(
    ours_meta: dict[str, Any], counts: tuple[int, ...] = (0, 1, 10, 100, 1_000, 10_000)
) -> list[Load]:
    """``ours_meta``: our metadata item; its context is counted as empty."""
    sid = "0" * 32
    ours_meta_bytes = (
        sizing.item_size({k: v for k, v in ours_meta.items() if k != "context"})
        + len(b"context")
        + 3
    )
    src_meta_bytes = sizing.item_size(_source_base())
    ours_record = sizing.item_size(_ours_record(sid, 1))
    src_record = sizing.item_size(_source_record(sid, 1))
    out = []
    for n in counts:
        ob, op, orcu = _query_cost(ours_meta_bytes, ours_record, n)
        sb, sp, srcu = _query_cost(src_meta_bytes, src_record, n)
        out.append(Load(n, ob, op, orcu, sb, sp, srcu))
    return out


def run(endpoint: str) -> tuple[Growth, Growth, list[Load], dict[str, int]]:
    base = _ours_base(endpoint)
    ours, source = context_growth(base)
    loads = load_costs(base)
    sid = "0" * 32
    sizes = {
        "ours_record_bytes": sizing.item_size(_ours_record(sid, 1)),
        "source_record_bytes": sizing.item_size(_source_record(sid, 1)),
        "ours_metadata_empty_bytes": ours.base_bytes,
        "source_metadata_empty_bytes": source.base_bytes,
        "metadata_overhead_reserved": METADATA_OVERHEAD,
    }
    return ours, source, loads, sizes


def checkpoints(g: Growth) -> list[tuple[int, int | None]]:
    points = [n for n in CHECKPOINTS if n <= g.max_messages] + [g.max_messages]
    return [(n, g.wcu_at(n)) for n in sorted(set(points))]


def kib(n: int) -> str:
    return f"{n / 1024:,.1f} KiB" if n >= 1024 else f"{n} B"
