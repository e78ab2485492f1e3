"""Hostile input, with hypothesis: >= 1,000 examples per public entry point.

Each example builds a call whose arguments are all valid, or with one (or several) replaced by
something hostile: ids that are empty, too long, hold control characters, whitespace, '#' or
non-ASCII; payloads that nest deeply, are huge, hold NaN/Infinity, bytes, sets, arbitrary
objects, lone surrogates, giant ints; ttl_seconds that is 0, negative, huge, a float or a bool.

Every call must either round-trip exactly (compared type by type, -0.0 included) or raise
``InvalidInput`` / ``ItemTooLarge`` (or the error the model predicts for a valid call on a
missing, foreign, closed or full session) *with nothing written*:

* a refusal that sent no request (``RequestLog``) cannot have written anything;
* a refusal that did send one is followed by a read of the item it aimed at, compared with the
  model;
* after all examples, a full Scan of the test's own table is compared with the model.

Runs are reproducible (``derandomize=True``, no example database). Valid-but-boring calls are
not skipped: about one example in eight is all-valid and goes to the engine (the embedded engine
answers in ~10 ms here, so that share is what keeps the file inside its time budget).
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import sessionstore as ss
from sessionstore import codec
from sessionstore.attributes import ATTRIBUTES_MAX_BYTES, RESERVED_ATTRIBUTE_NAMES
from sessionstore.codec import decode
from sessionstore.item import attributes_size, session_from_item, stored
from sessionstore.local import LocalDynamoDB
from sessionstore.retry import RetryPolicy
from sessionstore.testing import RequestLog
from sessionstore.tool_calls import record_from_item
from tests.conftest import scan

EXAMPLES = 250
S = ss.Status
_DESER = TypeDeserializer()
_tables = itertools.count(1)
MAX_TTL = 366 * 86400 * 10

HOSTILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    # No shrinking: the model carries state from one example to the next, so a replayed
    # "smaller" example would not meet the same table; the first failure is the one to see.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
    ],
)

# ------------------------------------------------------------------------------ strategies

VISIBLE = st.characters(min_codepoint=0x21, max_codepoint=0x7E)
valid_ids = st.text(VISIBLE, min_size=1, max_size=128)
_short = st.text(VISIBLE, max_size=8)
_bad_chars = st.sampled_from(
    [
        "\x00",
        "\t",
        "\n",
        "\r",
        " ",
        "\x7f",
        "\x1b",
        "\u00e9",
        "\u00a0",
        "\u2028",
        "\ufeff",
        "\u200b",
        "\ud800",
        "\udfff",
        "\U0001f642",
        "\uff03",
    ]
)
hostile_ids: st.SearchStrategy[Any] = st.one_of(
    st.just(""),
    st.text(VISIBLE, min_size=129, max_size=400),
    st.builds(lambda a, c, b: a + c + b, _short, _bad_chars, _short),
    st.text(min_size=1, max_size=12),  # arbitrary unicode (sometimes valid by chance)
    st.text(st.characters(categories=["Cc", "Zs", "Cs"]), min_size=1, max_size=4),
    st.none(),
    st.integers(),
    st.floats(),
    st.binary(max_size=8),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.just(b"session"),
    st.builds(object),
)
owners_valid: st.SearchStrategy[Any] = st.one_of(st.none(), valid_ids)
ttl_valid = st.integers(1, MAX_TTL)
ttl_hostile: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from([0, -1, -86400, MAX_TTL + 1, 10**12, 10**100, -(10**100)]),
    st.integers(max_value=0),
    st.integers(min_value=MAX_TTL + 1),
    st.floats(),
    st.booleans(),
    st.text(max_size=4),
    st.none(),
    st.just(Decimal("60")),
    st.just(60.0),
    st.just(float("inf")),
    st.just(float("nan")),
)

_leaf: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63, max_value=2**200),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 5e-324, 1e308]),
    st.text(max_size=20),
)
json_values: st.SearchStrategy[Any] = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=10,
)


def _nest(depth: int, kind: str) -> Any:
    value: Any = "core"
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


_bad_leaf: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from([float("nan"), float("inf"), float("-inf")]),
    st.binary(max_size=8),
    st.sets(st.integers(), max_size=3),
    st.frozensets(st.text(max_size=3), max_size=3),
    st.builds(_Opaque),
    st.builds(object),
    st.just(Decimal("1.5")),
    st.tuples(st.integers()),
    st.complex_numbers(max_magnitude=10),
    st.builds(lambda: 10**5000),  # past Python's int-to-text limit (no repr: it can't print)
    st.sampled_from(["\ud800", "x\udfffy", "\udbff\udbff"]),  # lone surrogates
    st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2),  # non-string keys
    st.dictionaries(st.just("\ud800"), st.integers(), min_size=1, max_size=1),
)
hostile_values: st.SearchStrategy[Any] = st.one_of(
    _bad_leaf,
    st.lists(st.one_of(json_values, _bad_leaf), min_size=1, max_size=3).filter(
        lambda xs: any(not _json_ok(x) for x in xs)
    ),
    st.builds(lambda v: {"ok": 1, "bad": v}, _bad_leaf),
    st.builds(_nest, st.integers(257, 1200), st.sampled_from(["list", "dict"])),
    st.builds(
        lambda n, c: c * n,
        st.sampled_from([409_600, 500_000, 1_200_000]),
        st.sampled_from(["x", "\u00e9", "\U0001f642"]),
    ),
)
payloads_valid: st.SearchStrategy[Any] = st.one_of(
    json_values,
    json_values,
    json_values,
    st.builds(_nest, st.integers(1, 256), st.sampled_from(["list", "dict"])),
    st.builds(lambda n: "y" * n, st.sampled_from([1_000, 20_000])),
)


def _json_ok(value: Any, depth: int = 0) -> bool:
    """Our own oracle: a JSON value the store must accept (depth: the package's 256)."""
    if depth > 256:
        return False
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return abs(value) < 10**4300  # Python's int-to-text limit
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return _text_ok(value)
    if type(value) is list:
        return all(_json_ok(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(
            isinstance(k, str) and _text_ok(k) and _json_ok(v, depth + 1) for k, v in value.items()
        )
    return False


def _text_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _id_ok(value: Any) -> bool:
    return (
        isinstance(value, str)
        and 1 <= len(value) <= 128
        and all("\x21" <= c <= "\x7e" for c in value)
    )


def _ttl_ok(value: Any) -> bool:
    return type(value) is int and 1 <= value <= MAX_TTL


def same(a: Any, b: Any) -> bool:
    """Exact equality: same types all the way down, -0.0 is not 0.0, key order kept."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@st.composite
def calls(draw: st.DrawFn, valid: dict[str, Any], hostile: dict[str, Any]) -> dict[str, Any]:
    """All-valid arguments (1 in 8), one hostile argument (6 in 8) or several (1 in 8)."""
    mode = draw(st.sampled_from(["valid", "one", "one", "one", "one", "one", "one", "many"]))
    names = [n for n in valid if n in hostile]
    if mode == "valid":
        bad: set[str] = set()
    elif mode == "one":
        bad = {draw(st.sampled_from(names))}
    else:
        bad = set(draw(st.lists(st.sampled_from(names), min_size=2, unique=True)))
    return {n: draw(hostile[n] if n in bad else valid[n]) for n in valid}


# ------------------------------------------------------------------------------ the model


def _session(meta: dict[str, Any], attrs: dict[str, Any] | None) -> ss.Session:
    """The session as its two items hold it: the attributes item counts only when it is this
    incarnation's and the metadata item says there are attributes."""
    found = stored(attrs)
    if found is None or found.incarnation != meta["incarnation"] or not meta["attrsRev"]:
        return session_from_item(meta)
    return session_from_item(meta, found.attributes)


@dataclass
class Env:
    client: Any
    table: str
    store: ss.SessionStore
    requests: RequestLog
    clock: ss.ManualClock
    sessions: dict[str, ss.Session] = field(default_factory=dict)
    records: dict[tuple[str, str], ss.ToolCallRecord] = field(default_factory=dict)
    contexts: dict[str, list[Any]] = field(default_factory=dict)  # messages, as appended
    examples: int = 0
    sent: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def note(self, outcome: str) -> None:
        self.examples += 1
        self.sent += bool(self.requests.count)
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def fresh(self, owner: str | None = "alice", *, active: bool = True) -> str:
        session = self.store.create_session(owner=owner)
        if active:
            session = self.store.activate(session.session_id, owner=owner)
        self.sessions[session.session_id] = session
        return session.session_id

    def unchanged(self, session_id: Any) -> None:
        """After a refusal: the aimed-at session is exactly as the model says.

        Skipped when no request was sent (nothing can have been written) and for ids the model
        has never seen (absence of strays is checked by the final Scan, ``audit_table``)."""
        if self.requests.count == 0 or not _id_ok(session_id) or session_id not in self.sessions:
            return
        items = {
            sk: self.client.get_item(
                TableName=self.table,
                ConsistentRead=True,
                Key={"pk": {"S": f"session#{session_id}"}, "sk": {"S": sk}},
            ).get("Item")
            for sk in ("metadata", "metadata#attributes")
        }
        meta, attrs = (
            {k: _DESER.deserialize(v) for k, v in i.items()} if i else None for i in items.values()
        )
        assert meta is not None
        assert _session(meta, attrs) == self.sessions[session_id]

    def audit_table(self) -> None:
        """The whole table is exactly the model: no stray item, no stray change."""
        items = [
            {k: _DESER.deserialize(v) for k, v in i.items()} for i in scan(self.client, self.table)
        ]
        attrs = {i["pk"]: i for i in items if i["sk"] == "metadata#attributes"}
        metas = {
            i["sessionId"]: _session(i, attrs.get(i["pk"])) for i in items if i["sk"] == "metadata"
        }
        assert metas == self.sessions
        stored = {
            (i["sessionId"], i["toolCallId"]): record_from_item(i)
            for i in items
            if str(i["sk"]).startswith("tool#")
        }
        assert stored == self.records
        pages: dict[str, list[Any]] = {}
        for i in sorted(items, key=lambda i: (i["pk"], i["sk"])):
            if str(i["sk"]).startswith("msg#"):
                assert i["ttl"] == metas[i["pk"].removeprefix("session#")].ttl
                pages.setdefault(i["pk"].removeprefix("session#"), []).extend(
                    decode(m) for m in i["messages"]
                )
        assert set(pages) == {sid for sid, ms in self.contexts.items() if ms}
        for sid, messages in pages.items():
            assert same(messages, self.contexts[sid]), sid
            assert metas[sid].message_count == len(messages)
        page_count = sum(1 for i in items if str(i["sk"]).startswith("msg#"))
        # One item per call; an attributes item only for a session that has had attributes.
        with_attributes = sum(1 for s in metas.values() if s.attributes_rev)
        assert len(attrs) == with_attributes
        assert len(items) == len(metas) + with_attributes + len(stored) + page_count

    def report(self, name: str, started: float) -> None:
        elapsed = time.monotonic() - started
        print(
            f"hostile {name}: {self.examples} examples, {self.sent} sent a request, "
            f"{elapsed:.1f}s, outcomes {dict(sorted(self.outcomes.items()))}"
        )
        assert self.examples >= EXAMPLES, f"only {self.examples} examples ran"


@pytest.fixture
def env(engine: LocalDynamoDB) -> Iterator[Env]:
    client = ss.connect(engine.endpoint_url)
    table = f"hostile{next(_tables)}"
    clock = ss.ManualClock("2026-01-01T12:00:00Z")
    store = ss.SessionStore(
        client, table, clock=clock, ids=ss.CounterIds("h"), retry=RetryPolicy(sleep=lambda _s: None)
    )
    store.create_table()
    with RequestLog(client) as log:
        yield Env(client, table, store, log, clock)


def _run(env: Env, call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    env.requests.reset()
    try:
        return call(), None
    except ss.SessionStoreError as exc:
        return None, exc


# ------------------------------------------------------------------------------ entry points


def test_create_session(env: Env) -> None:
    started = time.monotonic()

    @HOSTILE
    @given(
        calls(
            {
                "session_id": st.one_of(valid_ids, st.none()),
                "owner": owners_valid,
                "ttl_seconds": ttl_valid,
            },
            {"session_id": hostile_ids, "owner": hostile_ids, "ttl_seconds": ttl_hostile},
        )
    )
    def run(args: dict[str, Any]) -> None:
        sid, owner, ttl = args["session_id"], args["owner"], args["ttl_seconds"]
        ok = (sid is None or _id_ok(sid)) and (owner is None or _id_ok(owner)) and _ttl_ok(ttl)
        session, err = _run(
            env, lambda: env.store.create_session(sid, owner=owner, ttl_seconds=ttl)
        )
        if not ok:
            assert isinstance(err, ss.InvalidInput), (args, err)
            assert env.requests.count == 0
            env.note("refused")
            return
        if isinstance(err, ss.SessionAlreadyExists):
            assert sid in env.sessions
            env.unchanged(sid)
            env.note("already exists")
            return
        assert err is None, (args, err)
        now_s = env.clock.now_ms() // 1000
        assert (session.owner, session.ttl, session.version, session.status) == (
            owner,
            now_s + ttl,
            1,
            S.INITIALIZING,
        )
        assert sid is None or session.session_id == sid
        assert env.store.get_session(session.session_id, owner=owner) == session
        env.sessions[session.session_id] = session
        env.note("round trip")

    run()
    env.audit_table()
    env.report("create_session", started)


def _session_ids(env: Env) -> st.SearchStrategy[Any]:
    known = st.sampled_from(sorted(env.sessions))
    return st.one_of(known, known, known, valid_ids)


def _owners() -> st.SearchStrategy[Any]:
    return st.sampled_from([None, "alice", "bob"])


def test_get_session(env: Env) -> None:
    started = time.monotonic()
    env.fresh("alice")
    env.fresh(None)
    env.fresh("bob", active=False)

    @HOSTILE
    @given(
        calls(
            {"session_id": _session_ids(env), "owner": _owners()},
            {"session_id": hostile_ids, "owner": hostile_ids},
        )
    )
    def run(args: dict[str, Any]) -> None:
        sid, owner = args["session_id"], args["owner"]
        session, err = _run(env, lambda: env.store.get_session(sid, owner=owner))
        if not (_id_ok(sid) and (owner is None or _id_ok(owner))):
            assert isinstance(err, ss.InvalidInput) and env.requests.count == 0, (args, err)
            env.note("refused")
        elif sid in env.sessions and env.sessions[sid].owner == owner:
            assert err is None and session == env.sessions[sid], (args, err)
            env.note("round trip")
        else:
            assert isinstance(err, ss.SessionNotFound), (args, err)
            env.note("not found")

    run()
    env.audit_table()
    env.report("get_session", started)


_statuses_hostile: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(["active", "ACTIVE", "closed", "", None, 1, 0, True, b"active"]),
    st.text(max_size=10),
    st.builds(object),
)
FRESH = "<fresh session>"


def _lifecycle(env: Env, method: str) -> None:
    started = time.monotonic()
    for _ in range(3):
        env.fresh("alice", active=False)

    @HOSTILE
    @given(
        calls(
            {
                "session_id": st.one_of(
                    st.just(FRESH),
                    st.sampled_from(sorted(env.sessions)),
                    st.sampled_from(sorted(env.sessions)),
                    valid_ids,
                ),
                "to": st.sampled_from(list(S)),
                "owner": st.just("alice") | _owners(),
            },
            {"session_id": hostile_ids, "to": _statuses_hostile, "owner": hostile_ids},
        )
    )
    def run(args: dict[str, Any]) -> None:
        sid, to, owner = args["session_id"], args["to"], args["owner"]
        if sid == FRESH:
            sid = env.fresh("alice", active=False)
        fn = getattr(env.store, method)
        session, err = _run(env, lambda: fn(sid, to, owner=owner))
        if not (_id_ok(sid) and (owner is None or _id_ok(owner)) and isinstance(to, S)):
            assert isinstance(err, ss.InvalidInput) and env.requests.count == 0, (args, err)
            env.note("refused")
            return
        before = env.sessions.get(sid)
        if before is None or before.owner != owner:
            assert isinstance(err, ss.SessionNotFound), (args, err)
            env.unchanged(sid)
            env.note("not found")
        elif before.status is to:
            assert err is None and session == before, (args, err)
            env.note("no-op")
        elif to in ss.TRANSITIONS[before.status]:
            assert err is None, (args, err)
            assert (session.status, session.version) == (to, before.version + 1)
            env.sessions[sid] = session  # ALL_NEW: what the engine stored (and audit_table)
            env.note("round trip")
        else:
            assert isinstance(err, ss.InvalidTransition), (args, err)
            assert (err.current, err.requested) == (before.status, to)
            env.unchanged(sid)
            env.note("invalid transition")

    run()
    env.audit_table()
    env.report(method, started)


def test_transition(env: Env) -> None:
    _lifecycle(env, "transition")


def test_update_status(env: Env) -> None:
    _lifecycle(env, "update_status")


def test_append_context(env: Env) -> None:
    started = time.monotonic()
    current = [env.fresh("alice")]
    closed = env.fresh("alice")
    for step in (env.store.begin_close, env.store.close):
        env.sessions[closed] = step(closed, owner="alice")

    @HOSTILE
    @given(
        calls(
            {
                "session_id": st.one_of(
                    st.just("<current>"), st.just("<current>"), st.just(closed), valid_ids
                ),
                "messages": st.lists(payloads_valid, min_size=1, max_size=3),
                "expected_version": st.one_of(
                    st.none(), st.none(), st.just("<current>"), st.integers(1, 5)
                ),
                "owner": st.one_of(st.just("alice"), st.just("alice"), _owners()),
            },
            {
                "session_id": hostile_ids,
                "messages": st.one_of(
                    st.lists(
                        st.one_of(payloads_valid, hostile_values), min_size=1, max_size=3
                    ).filter(lambda ms: not all(_json_ok(m) for m in ms)),
                    st.just([]),
                    st.text(max_size=5),
                    st.binary(max_size=5),
                    st.none(),
                    st.integers(),
                    st.dictionaries(st.text(max_size=3), json_values, max_size=2),
                    st.sets(st.integers(), min_size=1, max_size=2),
                    hostile_values,
                ),
                "expected_version": st.one_of(
                    st.integers(max_value=0),
                    st.booleans(),
                    st.floats(),
                    st.text(max_size=3),
                    st.just(Decimal(2)),
                ),
                "owner": hostile_ids,
            },
        )
    )
    def run(args: dict[str, Any]) -> None:
        sid = current[-1] if args["session_id"] == "<current>" else args["session_id"]
        messages, owner = args["messages"], args["owner"]
        expected = args["expected_version"]
        if expected == "<current>":
            expected = env.sessions[sid].version if _id_ok(sid) and sid in env.sessions else 1
        session, err = _run(
            env,
            lambda: env.store.append_context(sid, messages, expected_version=expected, owner=owner),
        )
        valid = (
            _id_ok(sid)
            and (owner is None or _id_ok(owner))
            and type(messages) in (list, tuple)
            and len(messages) > 0  # any Sequence
            and all(_json_ok(m) for m in messages)
            and (expected is None or (type(expected) is int and expected >= 1))
        )
        if not valid:
            assert isinstance(err, ss.InvalidInput | ss.ItemTooLarge), (args, err)
            env.unchanged(sid)
            env.note("refused" if env.requests.count == 0 else "refused after sending")
            return
        before = env.sessions.get(sid)
        if isinstance(err, ss.ItemTooLarge):
            env.unchanged(sid)
            env.note("too large")
        elif before is None or before.owner != owner:
            assert isinstance(err, ss.SessionNotFound), (args, err)
            env.unchanged(sid)
            env.note("not found")
        elif before.status is not S.ACTIVE:
            assert isinstance(err, ss.SessionNotActive), (args, err)
            env.unchanged(sid)
            env.note("not active")
        elif expected is not None and expected != before.version:
            assert isinstance(err, ss.VersionConflict), (args, err)
            assert err.current == before
            env.unchanged(sid)
            env.note("version conflict")
        else:
            assert err is None, (args, err)
            session = env.store.get_session(sid, owner=owner)  # the change reads nothing back
            assert session.version == before.version + 1
            expected_context = [*env.contexts.get(sid, []), *messages]
            assert session.message_count == before.message_count + len(messages)
            assert session.context_bytes == before.context_bytes + sum(
                len(codec.encode(m).encode("utf-8")) for m in messages
            )
            assert same(list(env.store.context(sid, owner=owner)), expected_context)
            env.contexts[sid] = expected_context
            env.sessions[sid] = session  # ALL_NEW: what the engine stored (and audit_table)
            env.note("round trip")
            if session.context_bytes > 60_000:  # keep requests small: start a new session
                current.append(env.fresh("alice"))

    run()
    env.audit_table()
    env.report("append_context", started)


_attr_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_.-]{0,63}", fullmatch=True).filter(
    lambda n: n.lower() not in RESERVED_ATTRIBUTE_NAMES
)
_attr_names_few = st.sampled_from(["title", "n", "client.info", "proto-v", "x_1"])
_attr_names_hostile: st.SearchStrategy[Any] = st.one_of(
    hostile_ids,
    st.sampled_from(["status", "Version", "TTL", "attrs", "tk", "owner", "context"]),
    st.text(VISIBLE, min_size=65, max_size=80),
    st.sampled_from(["1a", "_a", ".a", "a b", "a#b", "a:b", "é", ""]),
)


def _attr_name_ok(name: Any) -> bool:
    return (
        isinstance(name, str)
        and re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{0,63}", name) is not None
        and name.lower() not in RESERVED_ATTRIBUTE_NAMES
    )


def test_update_attributes(env: Env) -> None:
    started = time.monotonic()
    current = [env.fresh("alice")]
    closed = env.fresh("alice")
    for step in (env.store.begin_close, env.store.close):
        env.sessions[closed] = step(closed, owner="alice")
    names = st.one_of(_attr_names_few, _attr_names_few, _attr_names)

    @HOSTILE
    @given(
        calls(
            {
                "session_id": st.one_of(
                    st.just("<current>"), st.just("<current>"), st.just(closed), valid_ids
                ),
                "changes": st.dictionaries(names, json_values, max_size=3),
                "remove": st.lists(_attr_names_few, max_size=2),
                "expected_version": st.one_of(
                    st.none(), st.none(), st.just("<current>"), st.integers(1, 5)
                ),
                "owner": st.one_of(st.just("alice"), st.just("alice"), _owners()),
            },
            {
                "session_id": hostile_ids,
                "changes": st.one_of(
                    st.dictionaries(
                        _attr_names_hostile.filter(lambda k: not isinstance(k, list)),
                        json_values,
                        min_size=1,
                        max_size=2,
                    ),
                    st.dictionaries(names, hostile_values, min_size=1, max_size=2),
                    st.lists(st.tuples(names, json_values), max_size=2),
                    st.text(max_size=4),
                    st.none(),
                    st.integers(),
                    st.builds(lambda n: {"big": "x" * n}, st.sampled_from([4_100, 50_000])),
                ),
                "remove": st.one_of(
                    st.lists(_attr_names_hostile, min_size=1, max_size=2),
                    st.text(min_size=1, max_size=4),
                    st.binary(max_size=3),
                    st.none(),
                    st.integers(),
                ),
                "expected_version": st.one_of(
                    st.integers(max_value=0), st.booleans(), st.floats(), st.text(max_size=3)
                ),
                "owner": hostile_ids,
            },
        )
    )
    def run(args: dict[str, Any]) -> None:
        sid = current[-1] if args["session_id"] == "<current>" else args["session_id"]
        changes, remove, owner = args["changes"], args["remove"], args["owner"]
        expected = args["expected_version"]
        if expected == "<current>":
            expected = env.sessions[sid].version if _id_ok(sid) and sid in env.sessions else 1
        session, err = _run(
            env,
            lambda: env.store.update_attributes(
                sid, changes, remove=remove, expected_version=expected, owner=owner
            ),
        )
        valid = (
            _id_ok(sid)
            and (owner is None or _id_ok(owner))
            and isinstance(changes, dict)
            and all(_attr_name_ok(k) and _json_ok(v) for k, v in changes.items())
            and isinstance(remove, list | tuple)
            and all(_attr_name_ok(n) for n in remove)
            and bool(changes or remove)
            and not set(changes) & set(remove)
            and (expected is None or (type(expected) is int and expected >= 1))
        )
        if not valid:
            assert isinstance(err, ss.InvalidInput | ss.ItemTooLarge), (args, err)
            assert env.requests.count == 0, args
            env.note("refused")
            return
        before = env.sessions.get(sid)
        if before is None or before.owner != owner:
            assert isinstance(err, ss.SessionNotFound | ss.ItemTooLarge), (args, err)
            env.unchanged(sid)
            env.note("not found")
            return
        after = {k: v for k, v in before.attributes.raw.items() if k not in remove}
        after.update({k: codec.encode(v) for k, v in changes.items()})
        if before.status is S.CLOSED:
            assert isinstance(err, ss.SessionNotActive | ss.ItemTooLarge), (args, err)
            env.unchanged(sid)
            env.note("closed")
        elif expected is not None and expected != before.version:
            assert isinstance(err, ss.VersionConflict | ss.ItemTooLarge), (args, err)
            env.unchanged(sid)
            env.note("version conflict")
        elif attributes_size(after) > ATTRIBUTES_MAX_BYTES:
            assert isinstance(err, ss.ItemTooLarge), (args, err)
            env.unchanged(sid)
            env.note("too large")
        else:
            assert err is None, (args, err)
            session = env.store.get_session(sid, owner=owner)  # the change reads nothing back
            assert session.version == before.version + 1
            assert set(session.attributes) == set(after)
            assert all(same(session.attributes[k], decode(v)) for k, v in after.items())
            env.sessions[sid] = session
            env.note("round trip")
            if len(after) > 12:  # keep the map small: start a new session
                current.append(env.fresh("alice"))

    run()
    env.audit_table()
    env.report("update_attributes", started)


def test_record_tool_call(env: Env) -> None:
    started = time.monotonic()
    active = env.fresh("alice")
    idle = env.fresh("alice", active=False)

    @HOSTILE
    @given(
        calls(
            {
                "session_id": st.one_of(st.just(active), st.just(active), st.just(idle), valid_ids),
                "tool_call_id": valid_ids,
                "tool_name": st.text(min_size=1, max_size=256).filter(_text_ok),
                "input": payloads_valid,
                "output": payloads_valid,
                "duration_ms": st.integers(0, 10**12),
                "owner": st.one_of(st.just("alice"), st.just("alice"), _owners()),
                "ttl_seconds": st.one_of(st.none(), ttl_valid),
            },  # None: the session's own ttl
            {
                "session_id": hostile_ids,
                "tool_call_id": hostile_ids,
                "tool_name": st.one_of(
                    st.just(""),
                    st.text(min_size=257, max_size=300),
                    st.sampled_from(["\ud800", "x\udfff"]),
                    st.none(),
                    st.integers(),
                    st.binary(max_size=3),
                ),
                "input": hostile_values,
                "output": hostile_values,
                "duration_ms": st.one_of(
                    st.integers(max_value=-1),
                    st.floats(),
                    st.booleans(),
                    st.text(max_size=3),
                    st.none(),
                ),
                "owner": hostile_ids,
                "ttl_seconds": ttl_hostile,
            },
        )
    )
    def run(args: dict[str, Any]) -> None:
        a = args
        record, err = _run(
            env,
            lambda: env.store.record_tool_call(
                a["session_id"],
                a["tool_call_id"],
                a["tool_name"],
                a["input"],
                a["output"],
                a["duration_ms"],
                owner=a["owner"],
                ttl_seconds=a["ttl_seconds"],
            ),
        )
        sid, tid, owner = a["session_id"], a["tool_call_id"], a["owner"]
        name = a["tool_name"]
        valid = (
            _id_ok(sid)
            and _id_ok(tid)
            and (owner is None or _id_ok(owner))
            and isinstance(name, str)
            and 1 <= len(name) <= 256
            and _text_ok(name)
            and _json_ok(a["input"])
            and _json_ok(a["output"])
            and type(a["duration_ms"]) is int
            and a["duration_ms"] >= 0
            and (a["ttl_seconds"] is None or _ttl_ok(a["ttl_seconds"]))
        )
        if not valid:
            assert isinstance(err, ss.InvalidInput | ss.ItemTooLarge), (args, err)
            assert env.requests.count == 0
            env.note("refused")
            return
        before = env.sessions.get(sid)
        stored = env.records.get((sid, tid))
        env.unchanged(sid)  # a refused record leaves the session alone (audit_table: records)
        if isinstance(err, ss.ItemTooLarge):
            env.note("too large")
        elif before is None or before.owner != owner:
            assert isinstance(err, ss.SessionNotFound), (args, err)
            env.note("not found")
        elif stored is not None:
            same_call = (
                stored.tool_name == name
                and same(stored.input, a["input"])
                and same(stored.output, a["output"])
            )
            if isinstance(err, ss.ToolCallConflict):
                assert err.stored == stored
                env.note("conflict")
            else:
                assert err is None and record == stored, (args, err)
                assert same_call or stored.input == a["input"]  # key order may differ
                env.note("idempotent replay")
        elif before.status is not S.ACTIVE:
            assert isinstance(err, ss.SessionNotActive), (args, err)
            env.note("not active")
        else:
            assert err is None, (args, err)
            now_s = env.clock.now_ms() // 1000
            # A record never outlives its session: a longer ttl_seconds is cut to the session's.
            ttl = (
                before.ttl
                if a["ttl_seconds"] is None
                else min(now_s + a["ttl_seconds"], before.ttl)
            )
            assert (
                record.session_id,
                record.tool_call_id,
                record.tool_name,
                record.duration_ms,
                record.ttl,
            ) == (sid, tid, name, a["duration_ms"], ttl)
            assert same(record.input, a["input"]) and same(record.output, a["output"])
            item = env.client.get_item(
                TableName=env.table,
                ConsistentRead=True,
                Key={
                    "pk": {"S": f"session#{sid}"},
                    "sk": {"S": f"tool#{tid}"},
                },
            )["Item"]
            assert record_from_item({k: _DESER.deserialize(v) for k, v in item.items()}) == record
            env.records[(sid, tid)] = record
            env.clock.advance(ms=1)
            env.note("round trip")

    run()
    env.audit_table()
    env.report("record_tool_call", started)


def _history(env: Env, method: str) -> None:
    started = time.monotonic()
    for owner in ("alice", None):
        sid = env.fresh(owner)
        messages = [{"n": -0.0}, [1, 2.5], "three"]
        env.sessions[sid] = env.store.append_context(sid, messages[:2], owner=owner)
        env.sessions[sid] = env.store.append_context(sid, messages[2:], owner=owner)
        env.contexts[sid] = messages
        for n in range(3):
            record = env.store.record_tool_call(
                sid, f"c{n}", "t", {"n": n}, [n, -0.0], n, owner=owner
            )
            env.records[(sid, f"c{n}")] = record
            env.clock.advance(ms=1)

    @HOSTILE
    @given(
        calls(
            {"session_id": _session_ids(env), "owner": _owners()},
            {"session_id": hostile_ids, "owner": hostile_ids},
        )
    )
    def run(args: dict[str, Any]) -> None:
        sid, owner = args["session_id"], args["owner"]
        if method == "tool_calls":  # a generator: nothing happens before the first next()
            result, err = _run(env, lambda: list(env.store.tool_calls(sid, owner=owner)))
        else:
            result, err = _run(env, lambda: env.store.load(sid, owner=owner))
        if not (_id_ok(sid) and (owner is None or _id_ok(owner))):
            assert isinstance(err, ss.InvalidInput) and env.requests.count == 0, (args, err)
            env.note("refused")
            return
        if sid not in env.sessions or env.sessions[sid].owner != owner:
            assert isinstance(err, ss.SessionNotFound), (args, err)
            env.note("not found")
            return
        assert err is None, (args, err)
        history = sorted(
            (r for (s, _), r in env.records.items() if s == sid), key=lambda r: r.recorded_at
        )
        if method == "tool_calls":
            assert result == history
        else:
            session, context, records = result
            assert session == env.sessions[sid] and records == history
            assert same(list(context), env.contexts.get(sid, []))
        env.note("round trip")

    run()
    env.audit_table()
    env.report(method, started)


def test_tool_calls(env: Env) -> None:
    _history(env, "tool_calls")


def test_load(env: Env) -> None:
    _history(env, "load")


def test_append_context_refuses_an_unhashable_session_id(env: Env) -> None:
    """Found by this harness: append_context looked up its size hint (a dict) before
    validating the id, so a list id raised a raw TypeError. Fixed in the store."""
    with pytest.raises(ss.InvalidInput):
        env.store.append_context(["not", "an", "id"], ["hello"])  # type: ignore[arg-type]
    assert env.requests.count == 0
