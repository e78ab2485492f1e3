"""Phase 4: what an append, a transition and a full read cost as the context grows -- the
inline layout against the paged one, at 10, 100, 1,000 and 10,000 messages of 500 B.

Computed with ``sessionstore.sizing`` (DynamoDB's item-size and capacity rules) from the items as
the store writes them in the embedded engine; moto's own ``ConsumedCapacity`` is flat and
useless here. A write is billed on the larger of the item before and after, 1 WCU per started KB,
twice that inside a transaction; a Query on the summed size of the items of each page it returns,
rounded up to 4 KB (strongly consistent: 1 RCU per 4 KB).

* **paged** (the package now): each size gets its own session, built in the engine -- filled to
  N-1 messages with appends of ``FILL_BATCH`` messages (fewer pages than one message per append,
  so the read is a little cheaper than a chat's; the computed one-message-per-page read is shown
  next to it), then the append of message N alone: its requests counted (``RequestLog``), the
  metadata item read before and after and the page it wrote read back (GetItem on another
  client), WCU = ``write_units(max(old, new))`` per item written. The whole context is then read
  with ``store.context()`` and with ``store.load()`` -- Query requests counted, RCU summed per
  Query page over the items it returned -- and checked message for message. Last, one
  transition (active -> closing), measured the same way.
* **inline** (the layout before pages, as the source design has it): the whole context as a list
  of JSON strings inside the metadata item, so every write to it -- an append, a transition --
  rewrites and bills the whole item, and a read is one GetItem of it. Its size is the paged
  session's metadata item as the engine holds it, turned into that layout (no
  ``messageCount``; ``context`` + ``contextBytes``): a closed form checked against
  ``sizing.item_size`` and, at 10 and 100 messages, against the item stored in the engine and
  read back by the store. DynamoDB refuses a write whose item would pass 409,600 B, so past that
  point there is no figure, only the refusal.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeSerializer

import sessionstore as ss
from sessionstore import codec, schema, sizing
from sessionstore.clock import format_timestamp
from sessionstore.item import METADATA_OVERHEAD
from sessionstore.testing import RequestLog
from sessionstore.tool_calls import call_item, recorded_fields

_SER = TypeSerializer()
#: DynamoDB returns at most 1 MB per Query page (moto: 1,000,000 B by its own measure).
PAGE_BYTES = 1_048_576
MESSAGE_BYTES = 500
SIZES = (10, 100, 1_000, 10_000)
#: messages per append while filling a session up to N-1 (a turn of a chat, say)
FILL_BATCH = 10
#: ... and if the fill runs late (a slow machine), this many, to stay bounded
FILL_BATCH_LATE = 200
REFUSED = "refused (400 KB item limit)"
#: the cost-growth targets
APPEND_TARGET_WCU = 3
TRANSITION_TARGET_WCU = 2
#: the inline curve, for the table (the plot and the CSV have every append)
CHECKPOINTS = (1, 10, 50, 100, 200, 400, 600)

TOOL_INPUT = {"query": "dynamodb optimistic locking", "limit": 5, "filters": {"lang": "en"}}
TOOL_OUTPUT = {
    "hits": [
        {"title": f"result {i}", "score": 0.9 - i / 10, "url": f"https://e/{i}"} for i in range(3)
    ]
}


def message(i: int, size: int = MESSAGE_BYTES) -> dict[str, Any]:
    """Chat message ``i``: exactly ``size`` bytes of canonical JSON text, each one different."""
    msg: dict[str, Any] = {"role": ("user", "assistant")[i % 2], "seq": i, "content": ""}
    pad = size - len(codec.encode(msg).encode("utf-8"))
    msg["content"] = (f"message {i}: " + "lorem ipsum dolor sit amet " * (size // 27 + 1))[:pad]
    assert len(codec.encode(msg).encode("utf-8")) == size
    return msg


@dataclass
class Growth:
    """The inline layout's cost curve: one append after another until DynamoDB refuses."""

    design: str
    message_bytes: int  # one message's JSON text
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
        if 1 <= n <= len(self.series):
            return self.series[n - 1][2]
        return None

    def size_at(self, n: int) -> int | None:
        if 1 <= n <= len(self.series):
            return self.series[n - 1][1]
        return None


@dataclass
class Point:
    """Both designs at one context size: the append of message ``messages``, then a full read,
    then a transition."""

    messages: int
    # paged, measured in the engine
    append_wcu: int
    append_meta_wcu: int
    append_page_wcu: int
    append_requests: dict[str, int]
    meta_bytes_before: int
    meta_bytes_after: int
    page_bytes: int  # the page of the single 500 B message
    transition_wcu: int
    transition_requests: dict[str, int]
    transition_meta_bytes: tuple[int, int]
    context_requests: dict[str, int]  # store.context(), read to the end
    context_rcu: float
    context_bytes_read: int
    context_exact: bool
    load_requests: dict[str, int]
    load_rcu: float
    load_exact: bool
    one_per_page_queries: int  # computed: the same context, one message per page
    one_per_page_rcu: float
    pages_built: int
    build_s: float
    # inline, computed (None: the item cannot hold that many)
    inline_item_bytes: int | None = None
    inline_append_wcu: int | None = None
    inline_transition_wcu: int | None = None
    inline_read_rcu: float | None = None
    inline_read_requests: int | None = None


@dataclass
class Curves:
    inline: Growth
    paged: list[Point]
    inline_checked: list[tuple[int, int, int]]  # (n, engine item bytes, formula bytes)
    sizes: dict[str, int] = field(default_factory=dict)


class _Meter:
    """Requests sent on ``client`` (``RequestLog``) and the item sizes of each Query page."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.log = RequestLog(client)
        self.query_pages: list[list[int]] = []

    def _on_query(self, parsed: dict[str, Any], **_: Any) -> None:
        self.query_pages.append([sizing.item_size(i) for i in parsed.get("Items", [])])

    def __enter__(self) -> _Meter:
        self.log.reset()
        self.query_pages = []
        self.log.attach()
        self.client.meta.events.register("after-call.dynamodb.Query", self._on_query)
        return self

    def __exit__(self, *_: Any) -> None:
        self.log.detach()
        self.client.meta.events.unregister("after-call.dynamodb.Query", self._on_query)

    @property
    def requests(self) -> dict[str, int]:
        return dict(self.log.counts())  # in the order first sent

    @property
    def rcu(self) -> float:
        return sum(sizing.query_read_units(p) for p in self.query_pages)

    @property
    def bytes_read(self) -> int:
        return sum(sum(p) for p in self.query_pages)


def _size(client: Any, table: str, key: dict[str, Any]) -> int:
    item = client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    return sizing.item_size(item) if item else 0


def _transactional(requests: dict[str, int]) -> bool:
    return "TransactWriteItems" in requests


def _query_pages(sizes: list[int]) -> tuple[int, float]:
    """(Query requests, RCU) of one paginated Query returning items of these sizes."""
    pages, rcu, page = 0, 0.0, 0
    for size in sizes:
        if page and page + size > PAGE_BYTES:
            rcu += sizing.read_units(page)
            pages += 1
            page = 0
        page += size
    return pages + 1, rcu + sizing.read_units(page)


def measure_paged(
    store: ss.SessionStore,
    probe: Any,
    n: int,
    *,
    owner: str = "alice",
    fill_deadline: float = math.inf,
    progress: Callable[[str], None] = lambda _m: None,
) -> tuple[Point, dict[str, Any]]:
    """Build a session of ``n`` messages (the last one appended alone) and measure it; also
    return its metadata item before the transition (low-level, as the engine holds it)."""
    table = store.table_name
    sid = store.create_session(owner=owner).session_id
    store.activate(sid, owner=owner)
    expected = [message(i) for i in range(n)]
    start = time.monotonic()
    shown = start
    done = pages = 0
    while done < n - 1:
        batch = FILL_BATCH if time.monotonic() < fill_deadline else FILL_BATCH_LATE
        chunk = expected[done : min(done + batch, n - 1)]
        store.append_context(sid, chunk, owner=owner)
        done += len(chunk)
        pages += 1
        if time.monotonic() - shown > 10:
            shown = time.monotonic()
            progress(f"    {n:,}: {done:,} of {n - 1:,} messages stored ({shown - start:.0f} s)")
    build_s = time.monotonic() - start

    meta_key = schema.meta_key(sid)
    page_key = {"pk": {"S": schema.pk(sid)}, "sk": {"S": schema.page_sk(n - 1)}}
    meter = _Meter(store.client)
    before = _size(probe, table, meta_key)
    assert _size(probe, table, page_key) == 0
    with meter:
        store.append_context(sid, [expected[-1]], owner=owner)
    append_requests = meter.requests
    after = _size(probe, table, meta_key)
    page = _size(probe, table, page_key)
    tx = _transactional(append_requests)
    meta_wcu = sizing.write_units(max(before, after), transactional=tx)
    page_wcu = sizing.write_units(page, transactional=tx)

    with meter:
        got = list(store.context(sid, owner=owner))
    context_requests, context_rcu, context_read = meter.requests, meter.rcu, meter.bytes_read
    context_exact = got == expected
    with meter:
        loaded = store.load(sid, owner=owner)
    load_requests, load_rcu = meter.requests, meter.rcu
    load_exact = list(loaded.context) == expected
    del got, loaded

    meta_item = probe.get_item(TableName=table, Key=meta_key, ConsistentRead=True)["Item"]
    t_before = sizing.item_size(meta_item)
    with meter:
        store.begin_close(sid, owner=owner)
    transition_requests = meter.requests
    t_after = _size(probe, table, meta_key)
    transition_wcu = sizing.write_units(
        max(t_before, t_after), transactional=_transactional(transition_requests)
    )
    one_queries, one_rcu = _query_pages([after] + [page] * n)
    point = Point(
        messages=n,
        append_wcu=meta_wcu + page_wcu,
        append_meta_wcu=meta_wcu,
        append_page_wcu=page_wcu,
        append_requests=append_requests,
        meta_bytes_before=before,
        meta_bytes_after=after,
        page_bytes=page,
        transition_wcu=transition_wcu,
        transition_requests=transition_requests,
        transition_meta_bytes=(t_before, t_after),
        context_requests=context_requests,
        context_rcu=context_rcu,
        context_bytes_read=context_read,
        context_exact=context_exact,
        load_requests=load_requests,
        load_rcu=load_rcu,
        load_exact=load_exact,
        one_per_page_queries=one_queries,
        one_per_page_rcu=one_rcu,
        pages_built=pages + 1,
        build_s=build_s,
    )
    return point, meta_item


def inline_item(meta: dict[str, Any], texts: list[str]) -> dict[str, Any]:
    """``meta`` (a metadata item as the store writes it now, low-level) in the inline layout:
    the messages in ``context``, ``contextBytes`` the list's own size, no ``messageCount``."""
    item = {k: v for k, v in meta.items() if k not in ("messageCount", "contextBytes")}
    context = {"L": [{"S": t} for t in texts]}
    item["context"] = context
    item["contextBytes"] = {"N": str(sizing.value_size(context))}
    return item


def inline_growth(meta: dict[str, Any], *, message_bytes: int = MESSAGE_BYTES) -> Growth:
    """The inline layout's cost curve, one append after another, from ``meta`` (see
    ``inline_item``) until DynamoDB's 409,600 B refuses the item."""
    element = message_bytes + 1  # a string of the list, plus its 1 byte
    empty = inline_item(meta, [])
    rest = sizing.item_size({k: v for k, v in empty.items() if k != "contextBytes"}) - 3

    def size(n: int) -> int:
        list_bytes = 3 + n * element
        return rest + list_bytes + len(b"contextBytes") + sizing.number_size(list_bytes)

    for n in (0, 1, 3, 50):  # the closed form against the rule, on built items
        built = inline_item(meta, [codec.encode(message(i, message_bytes)) for i in range(n)])
        assert sizing.item_size(built) == size(n), "inline size formula drifted"
    limit = sizing.MAX_ITEM_BYTES
    series: list[tuple[int, int, int]] = []
    total, previous, n = 0, size(0), 1
    while size(n) <= limit:
        wcu = sizing.write_units(max(previous, size(n)))
        total += wcu
        series.append((n, size(n), wcu))
        previous = size(n)
        n += 1
    return Growth(
        design="inline",
        message_bytes=message_bytes,
        base_bytes=size(0),
        max_messages=len(series),
        refused_at_bytes=size(len(series) + 1),
        limit=f"DynamoDB refuses an item over {limit:,} B",
        last_item_bytes=series[-1][1],
        wcu_first=series[0][2],
        wcu_last=series[-1][2],
        wcu_total=total,
        series=series,
    )


def check_inline_in_engine(
    store: ss.SessionStore, probe: Any, meta: dict[str, Any], n: int, owner: str = "alice"
) -> tuple[int, int]:
    """Store a session of ``n`` messages in the inline layout (``meta`` under a new id; the
    store no longer reads that layout, so the item is only sized): (engine bytes, formula)."""
    sid = store.create_session(owner=owner).session_id
    texts = [codec.encode(message(i)) for i in range(n)]
    item = inline_item(meta, texts)
    item["pk"] = {"S": schema.pk(sid)}
    item["sessionId"] = {"S": sid}
    probe.put_item(TableName=store.table_name, Item=item)
    stored = _size(probe, store.table_name, schema.meta_key(sid))
    return stored, sizing.item_size(item)


def cost_curves(
    endpoint: str,
    sizes: tuple[int, ...] = SIZES,
    *,
    table: str = "bench-growth",
    deadline: float = math.inf,
    progress: Callable[[str], None] = lambda _m: None,
) -> Curves:
    """Both designs, side by side (a notebook can call this; ``sizes`` small for speed): the
    paged design measured in the engine at each size, the inline curve computed from the
    metadata item of the largest paged session."""
    client = ss.connect(endpoint)
    probe = ss.connect(endpoint)
    store = ss.SessionStore(client, table)
    store.create_table()
    points: list[Point] = []
    meta: dict[str, Any] = {}
    for i, n in enumerate(sizes):
        # leave the larger sizes their share of what is left
        left = deadline - time.monotonic()
        share = left * n / sum(sizes[i:]) if math.isfinite(left) else math.inf
        point, meta = measure_paged(
            store, probe, n, fill_deadline=time.monotonic() + share, progress=progress
        )
        points.append(point)
        progress(
            f"  paged, {n:,} messages: append {point.append_wcu} WCU "
            f"({point.append_meta_wcu} metadata + {point.append_page_wcu} page), transition "
            f"{point.transition_wcu} WCU, read {point.context_rcu:g} RCU in "
            f"{point.context_requests.get('Query', 0)} Query; built in {point.build_s:.0f} s "
            f"({point.pages_built} pages); read back exactly: {point.context_exact}"
        )
    inline = inline_growth(meta)
    checked = []
    for n in (10, 100):
        stored, formula = check_inline_in_engine(store, probe, meta, n)
        checked.append((n, stored, inline.size_at(n) or 0))
        assert stored == formula == inline.size_at(n), (n, stored, formula, inline.size_at(n))
    for p in points:
        size = inline.size_at(p.messages)
        if size is None:
            continue
        delta = p.transition_meta_bytes[1] - p.transition_meta_bytes[0]
        p.inline_item_bytes = size
        p.inline_append_wcu = inline.wcu_at(p.messages)
        p.inline_transition_wcu = sizing.write_units(max(size, size + delta))
        p.inline_read_rcu = sizing.read_units(size)
        p.inline_read_requests = 1
    return Curves(inline, points, checked)


def done_when(curves: Curves) -> list[tuple[str, bool]]:
    """The cost-growth targets, on these figures: (what, met)."""
    by_n = {p.messages: p for p in curves.paged}
    out: list[tuple[str, bool]] = []
    top = max(by_n) if by_n else 0
    if top in by_n:
        p = by_n[top]
        out.append(
            (
                f"{top:,} messages of {MESSAGE_BYTES} B stored and read back exactly "
                "(context() and load())",
                p.context_exact and p.load_exact,
            )
        )
    if 100 in by_n and top in by_n:
        a, b = by_n[100].append_wcu, by_n[top].append_wcu
        out.append((f"WCU per append flat: {a} at 100 messages, {b} at {top:,}", a == b))
    worst = max(p.append_wcu for p in curves.paged)
    out.append(
        (
            f"WCU per append <= {APPEND_TARGET_WCU} at every size (max {worst})",
            worst <= APPEND_TARGET_WCU,
        )
    )
    worst_t = max(p.transition_wcu for p in curves.paged)
    out.append(
        (
            f"WCU per transition <= {TRANSITION_TARGET_WCU} at every size (max {worst_t})",
            worst_t <= TRANSITION_TARGET_WCU,
        )
    )
    return out


@dataclass
class Load:
    records: int
    ours_bytes: int
    ours_pages: int
    ours_rcu: float
    source_bytes: int
    source_pages: int
    source_rcu: float


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


def _ours_record(session_id: str, n: int) -> dict[str, Any]:
    """A recorded call item exactly as ``record_tool_call`` writes it (``tool_calls``)."""
    at = format_timestamp(1_767_268_800_000 + n)
    call_id = f"call-{n:06d}"
    digest = codec.fingerprint(codec.encode("search"), TOOL_INPUT)
    item = {
        **call_item(session_id, call_id, "search", digest, at, 1_767_355_200),
        **recorded_fields(codec.encode(TOOL_INPUT), codec.encode(TOOL_OUTPUT), 42, at),
    }
    return {k: _SER.serialize(v) for k, v in item.items()}


def _source_record(session_id: str, n: int) -> dict[str, Any]:
    at = format_timestamp(1_767_268_800_000 + n)
    call_id = f"call-{n:06d}"

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
    pages, rcu = _query_pages(sizes)
    return sum(sizes), pages, rcu


def load_costs(
    ours_meta_bytes: int, counts: tuple[int, ...] = (0, 1, 10, 100, 1_000, 10_000)
) -> list[Load]:
    """``ours_meta_bytes``: our metadata item's size (its context is in pages: none here)."""
    sid = "0" * 32
    src_meta_bytes = sizing.item_size(_source_base())
    ours_record = sizing.item_size(_ours_record(sid, 1))
    src_record = sizing.item_size(_source_record(sid, 1))
    out = []
    for n in counts:
        ob, op, orcu = _query_cost(ours_meta_bytes, ours_record, n)
        sb, sp, srcu = _query_cost(src_meta_bytes, src_record, n)
        out.append(Load(n, ob, op, orcu, sb, sp, srcu))
    return out


def run(
    endpoint: str,
    *,
    sizes: tuple[int, ...] = SIZES,
    deadline: float = math.inf,
    progress: Callable[[str], None] = lambda _m: None,
) -> tuple[Curves, list[Load]]:
    curves = cost_curves(endpoint, sizes, deadline=deadline, progress=progress)
    meta = curves.paged[-1]
    sid = "0" * 32
    curves.sizes = {
        "message_bytes": MESSAGE_BYTES,
        "ours_record_bytes": sizing.item_size(_ours_record(sid, 1)),
        "source_record_bytes": sizing.item_size(_source_record(sid, 1)),
        "paged_metadata_bytes": meta.meta_bytes_after,
        "paged_page_bytes_one_message": meta.page_bytes,
        "inline_metadata_empty_bytes": curves.inline.base_bytes,
        "metadata_overhead_reserved": METADATA_OVERHEAD,
    }
    return curves, load_costs(meta.meta_bytes_after)


def checkpoints(g: Growth) -> list[tuple[int, int | None]]:
    points = [n for n in CHECKPOINTS if n <= g.max_messages] + [g.max_messages]
    return [(n, g.wcu_at(n)) for n in sorted(set(points))]


def kib(n: int) -> str:
    return f"{n / 1024:,.1f} KiB" if n >= 1024 else f"{n} B"
