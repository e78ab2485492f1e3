"""Phase 3: the library's own CPU cost per operation, with no network and no engine.

For each operation we first send it once through ``SessionStore`` to the embedded engine and
capture the exact request (API parameters) and the parsed response. Then, over botocore's
``Stubber`` (which answers in ``before-call``, after botocore has validated and serialized the
request, and returns the parsed response as is):

* **raw**: a boto3 client from ``sessionstore.connect`` sends the captured request verbatim;
* **sessionstore**: a ``SessionStore`` on another such client performs the same operation (and
  builds the identical request, with a fresh timestamp, then reads the response).

An operation may be several requests (an append: UpdateItem on the metadata item, then PutItem
of the context page); the raw side then sends each captured request, in order. The stubbed store
reuses the captured request token (``_FixedToken``): the append's page goes to the seq that the
captured response names for that token.

CPU time (``time.process_time``) per call over ``calls`` calls, ``repeats`` times, raw and
sessionstore alternating, median per side; the ratio is median(sessionstore) / median(raw).
Alongside it, the *paired* ratio: the median of each repeat's sessionstore/raw ratio, with a
bootstrap 95% interval. Each repeat's two sides run back to back, so the pairing cancels the
machine's slow drifts; with enough repeats (``--overhead-repeats``) the interval is narrow
enough to tell a 1.15x library from a 1.25x one, which 7 repeats on a noisy machine are not.
The Stubber skips HTTP, signing and response parsing for both sides alike, so the ratio is an
upper bound: with a real engine every call also pays those, in both columns.
"""

from __future__ import annotations

import copy
import cProfile
import gc
import pstats
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.stub import Stubber

import sessionstore as ss

TARGET = 1.15
BOOTSTRAP_SAMPLES = 2000
MESSAGE = {"role": "user", "content": "Summarise the open incidents for the payments service. " * 3}
TOOL_INPUT = {"query": "dynamodb optimistic locking", "limit": 5, "filters": {"lang": "en"}}
TOOL_OUTPUT = {
    "hits": [
        {"title": f"result {i}", "score": 0.9 - i / 10, "url": f"https://e/{i}"} for i in range(3)
    ]
}


@dataclass
class Captured:
    method: str  # client method name, e.g. "update_item"
    params: dict[str, Any]
    response: dict[str, Any]


@dataclass
class OpSpec:
    name: str
    captured: list[Captured]  # the operation's own requests, in order
    prime: list[Captured]  # the cold store's earlier reads, replayed once before timing
    call: Callable[[ss.SessionStore], Any]
    token: str | None = None  # the request token the captured responses name
    # When it was captured (epoch ms): the replaying store's clock stands still there, so what
    # the captured responses hold (the time in a token's entry, say) is as current as it was.
    at_ms: int = 0

    @property
    def request(self) -> str:
        return " + ".join(c.method for c in self.captured)


class _RecordingIds(ss.RandomIds):
    """Random ids that remember the last token handed out."""

    last: str | None = None

    def token(self) -> str:
        self.last = super().token()
        return self.last


class _FixedToken(ss.RandomIds):
    """Every request carries the captured token, so the captured responses fit it."""

    def __init__(self, token: str | None) -> None:
        self._token = token

    def token(self) -> str:
        return self._token if self._token is not None else super().token()


@dataclass
class OverheadResult:
    operation: str
    request: str
    raw_us: float
    ours_us: float
    ratio: float
    ratio_min: float
    ratio_max: float
    calls: int
    repeats: int
    profile: list[str] = field(default_factory=list)
    by_package_us: dict[str, float] = field(default_factory=dict)
    control: bool = False  # raw vs raw: the machine's noise on identical work
    paired: float = 0.0  # median of the per-repeat ratios
    paired_low: float = 0.0  # its bootstrap 95% interval
    paired_high: float = 0.0


def paired_interval(ratios: list[float], *, seed: int = 0) -> tuple[float, float, float]:
    """The median of per-repeat ratios and a percentile-bootstrap 95% interval for it
    (seeded: the same ratios give the same interval)."""
    rng = random.Random(seed)
    n = len(ratios)
    medians = sorted(statistics.median(rng.choices(ratios, k=n)) for _ in range(BOOTSTRAP_SAMPLES))
    tail = BOOTSTRAP_SAMPLES // 40  # 2.5 % each side
    return statistics.median(ratios), medians[tail], medians[-tail - 1]


_METHODS = {
    "PutItem": "put_item",
    "UpdateItem": "update_item",
    "GetItem": "get_item",
    "TransactWriteItems": "transact_write_items",
    "Query": "query",
}


class _Capture:
    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[Captured] = []
        self._params: list[tuple[str, dict[str, Any]]] = []

    def _before(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._params.append((model.name, copy.deepcopy(params)))

    def _after(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        name, params = self._params.pop(0)
        response = copy.deepcopy(parsed)
        response.pop("ResponseMetadata", None)
        self.calls.append(Captured(_METHODS[name], params, response))

    def __enter__(self) -> _Capture:
        self.client.meta.events.register("before-parameter-build.dynamodb", self._before)
        self.client.meta.events.register("after-call.dynamodb", self._after)
        return self

    def __exit__(self, *_: Any) -> None:
        self.client.meta.events.unregister("before-parameter-build.dynamodb", self._before)
        self.client.meta.events.unregister("after-call.dynamodb", self._after)


def capture_ops(endpoint: str, *, long_context: int = 100) -> list[OpSpec]:
    """Run each operation once against the engine, from a fresh (cold) store, and keep every
    request it made with its response: the leading reads (a read for the version hint, say)
    are replayed once to warm the stubbed store; the writes from the first one on are the
    operation's own requests."""
    client = ss.connect(endpoint)
    table = "bench-overhead"
    store = ss.SessionStore(client, table)
    store.create_table()
    owner = "alice"
    specs: list[OpSpec] = []

    def add(name: str, call: Callable[[ss.SessionStore], Any]) -> None:
        ids = _RecordingIds()
        cold = ss.SessionStore(client, table, ids=ids)
        at_ms = cold.clock.now_ms()
        with _Capture(client) as cap:
            call(cold)
        reads = 0
        while reads < len(cap.calls) - 1 and cap.calls[reads].method in ("get_item", "query"):
            reads += 1
        specs.append(OpSpec(name, cap.calls[reads:], cap.calls[:reads], call, ids.last, at_ms))

    sid = store.create_session(owner=owner).session_id
    store.activate(sid, owner=owner)
    for _ in range(3):
        store.append_context(sid, [MESSAGE], owner=owner)
    add("create_session", lambda s: s.create_session(owner=owner, ttl_seconds=3600))
    add("append_context", lambda s: s.append_context(sid, [MESSAGE], owner=owner))
    add(
        "record_tool_call",
        lambda s: s.record_tool_call(
            sid, "call-1", "search", TOOL_INPUT, TOOL_OUTPUT, 42, owner=owner
        ),
    )
    # The transition first: after an attribute change, a cold instance's transition also reads
    # the attributes (its ALL_NEW shows attrsRev moved), which a warm one does not.
    add("transition", lambda s: s.transition(sid, ss.Status.CLOSING, owner=owner))
    add(
        "update_attributes",
        lambda s: s.update_attributes(sid, {"title": "Incident review"}, owner=owner),
    )

    # The same append on a session whose context already holds ``long_context`` messages:
    # the metadata item no longer holds the context, so this should cost what the short one does.
    long_sid = store.create_session(owner=owner).session_id
    store.activate(long_sid, owner=owner)
    for _ in range(long_context // 10):
        store.append_context(long_sid, [MESSAGE] * 10, owner=owner)
    add(
        f"append_context ({long_context} msgs)",
        lambda s: s.append_context(long_sid, [MESSAGE], owner=owner),
    )
    return specs


def _warm(store: ss.SessionStore, stub: Stubber, spec: OpSpec) -> None:
    """Replay the cold calls once (the store learns its hint), then the steady-state call."""
    for primed in spec.prime:
        stub.add_response(primed.method, copy.deepcopy(primed.response))
    _queue(stub, spec.captured, 1)
    spec.call(store)
    stub.assert_no_pending_responses()


def _stubbed_client() -> tuple[Any, Stubber]:
    client = ss.connect("http://127.0.0.1:9")  # never contacted: the Stubber answers
    stubber = Stubber(client)
    stubber.activate()
    return client, stubber


def _stubbed_store(spec: OpSpec) -> tuple[ss.SessionStore, Stubber]:
    client, stubber = _stubbed_client()
    clock = ss.ManualClock(spec.at_ms)
    store = ss.SessionStore(client, "bench-overhead", ids=_FixedToken(spec.token), clock=clock)
    return store, stubber


def _queue(stubber: Stubber, captured: list[Captured], n: int) -> None:
    for _ in range(n):
        for c in captured:
            stubber.add_response(c.method, copy.deepcopy(c.response))


def _raw_call(client: Any, captured: list[Captured]) -> Callable[[], None]:
    calls = [(getattr(client, c.method), c.params) for c in captured]

    def call() -> None:
        for method, params in calls:
            method(**params)

    return call


def _cpu_per_call(fn: Callable[[], Any], n: int) -> float:
    gc.collect()
    start = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - start) / n


def measure(
    spec: OpSpec, *, calls: int, repeats: int, deadline: float, control: bool = False
) -> OverheadResult:
    """``control``: the "sessionstore" side is a second raw client sending the same request,
    so the ratio shows what the machine's noise alone makes of identical work."""
    raw_client, raw_stub = _stubbed_client()
    if control:
        twin_client, ours_stub = _stubbed_client()
        twin = _raw_call(twin_client, spec.captured)

        def ours() -> None:
            twin()

    else:
        store, ours_stub = _stubbed_store(spec)
        _warm(store, ours_stub, spec)

        def ours() -> None:
            spec.call(store)

    # more warm-up: imports, botocore's caches; from here on, one request per call
    _queue(ours_stub, spec.captured, 5)
    _queue(raw_stub, spec.captured, 5)
    raw = _raw_call(raw_client, spec.captured)
    for _ in range(5):
        ours()
        raw()
    raw_stub.assert_no_pending_responses()
    ours_stub.assert_no_pending_responses()

    raw_times: list[float] = []
    ours_times: list[float] = []
    for rep in range(repeats):
        if rep >= 3 and time.monotonic() > deadline:
            break
        sides = [("raw", raw_stub), ("ours", ours_stub)]
        if rep % 2:
            sides.reverse()
        for side, stub in sides:
            _queue(stub, spec.captured, calls)
            if side == "raw":
                raw_times.append(_cpu_per_call(raw, calls))
            else:
                ours_times.append(_cpu_per_call(ours, calls))
    ratios = [o / r for o, r in zip(ours_times, raw_times, strict=True)]
    paired, paired_low, paired_high = paired_interval(ratios)
    raw_us = statistics.median(raw_times) * 1e6
    ours_us = statistics.median(ours_times) * 1e6
    return OverheadResult(
        operation=f"control: {spec.name}, raw vs raw" if control else spec.name,
        request=spec.request,
        raw_us=raw_us,
        ours_us=ours_us,
        ratio=ours_us / raw_us,
        ratio_min=min(ratios),
        ratio_max=max(ratios),
        calls=calls,
        repeats=len(raw_times),
        control=control,
        paired=paired,
        paired_low=paired_low,
        paired_high=paired_high,
    )


_GROUPS = (
    ("sessionstore", "/sessionstore/"),
    ("boto3 TypeSerializer/Deserializer", "/boto3/dynamodb/types.py"),
    ("botocore + jmespath (shared with raw)", "/botocore/"),
    ("botocore + jmespath (shared with raw)", "/jmespath/"),
    ("json", "/json/"),
)
_OURS = ("/sessionstore/", "/boto3/dynamodb/types.py")
_WRAPPERS = {
    "_call",
    "_versioned",
    "create_session",
    "append_context",
    "record_tool_call",
    "transition",
    "update_attributes",
    "_write",
    "_drive",
    "write_page",  # the append's second request (its page): wraps the botocore call
    "drive",
    "<lambda>",
}


def profile(spec: OpSpec, *, calls: int, top: int = 8) -> tuple[list[str], dict[str, float]]:
    """Where sessionstore's time goes for ``spec`` (under cProfile, which inflates small
    functions): own time per package in us/call, and the sessionstore-side functions with the
    largest cumulative time that do not contain the botocore call itself."""
    store, stub = _stubbed_store(spec)
    _warm(store, stub, spec)
    _queue(stub, spec.captured, calls)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        spec.call(store)
    profiler.disable()
    entries = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(tt for (_cc, _nc, tt, _ct, _callers) in entries.values()) or 1.0
    botocore_call = sum(
        ct
        for (f, _l, fn), (_cc, _nc, _tt, ct, _c) in entries.items()
        if f.endswith("botocore/client.py") and fn == "_make_api_call"
    )
    groups: dict[str, float] = {}
    rows: list[tuple[float, str]] = []
    for (filename, line, func), (_cc, ncalls, tt, ct, _callers) in entries.items():
        group = "other (stdlib: datetime, secrets, hashlib, threading...)"
        for name, marker in _GROUPS:
            if marker in filename:
                group = name
                break
        groups[group] = groups.get(group, 0.0) + tt
        wraps_the_call = func in _WRAPPERS or ct >= 0.5 * total
        if any(m in filename for m in _OURS) and not wraps_the_call:
            short = filename.split("site-packages/")[-1].split("/main/")[-1]
            rows.append((ct, f"{short}:{line} {func}() x{ncalls / calls:g}"))
    rows.sort(reverse=True)
    per_call = 1e6 / calls
    lines = [
        f"total {total * per_call:.0f} us/call under cProfile; botocore call "
        f"{botocore_call * per_call:.0f} us ({botocore_call / total:.0%}); the rest "
        f"{(total - botocore_call) * per_call:.0f} us is sessionstore's side",
        *(f"{ct * per_call:7.1f} us cum  {where}" for ct, where in rows[:top]),
    ]
    shares = {k: round(v * per_call, 1) for k, v in sorted(groups.items(), key=lambda kv: -kv[1])}
    return lines, shares


def _ratios(r: OverheadResult) -> str:
    return f"x{r.ratio:.2f} (paired x{r.paired:.2f} [{r.paired_low:.2f}-{r.paired_high:.2f}])"


def run(
    endpoint: str, *, calls: int, repeats: int, deadline: float, progress: Callable[[str], None]
) -> list[OverheadResult]:
    specs = capture_ops(endpoint)
    results: list[OverheadResult] = []
    for spec in specs:
        result = measure(spec, calls=calls, repeats=repeats, deadline=deadline)
        if result.ratio > TARGET:
            result.profile, result.by_package_us = profile(spec, calls=max(100, calls // 2))
        results.append(result)
        progress(
            f"  {spec.name}: raw {result.raw_us:.0f} us, sessionstore "
            f"{result.ours_us:.0f} us, {_ratios(result)}"
        )
    # The noise floor: the same measurement with identical work on both sides.
    control = measure(specs[0], calls=calls, repeats=repeats, deadline=deadline, control=True)
    results.append(control)
    progress(f"  {control.operation}: {_ratios(control)}")
    return results
