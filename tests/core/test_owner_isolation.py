"""Owner isolation: another owner's session is indistinguishable from a missing one.

For every entry point, a call with the wrong owner must raise the same error type, with the same
message once the id is blanked, after the same number of requests (``RequestLog``) as the same
call on a session that does not exist -- and write nothing. Checked with a cold store (a fresh
instance: same operations, request for request) and with the warm store that created the
session (whose per-session hints must not leak either). Plus: generated session ids carry at
least 128 bits from the CSPRNG.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import sessionstore as ss
from sessionstore.retry import RetryPolicy
from sessionstore.testing import RequestLog
from tests.conftest import scan

S = ss.Status
Call = Callable[[ss.SessionStore, str, str | None], Any]

#: Every public entry point that takes a session id and an owner, as (name, call).
ENTRY_POINTS: list[tuple[str, Call]] = [
    ("get_session", lambda st, sid, o: st.get_session(sid, owner=o)),
    ("transition:active", lambda st, sid, o: st.transition(sid, S.ACTIVE, owner=o)),
    ("transition:closing", lambda st, sid, o: st.transition(sid, S.CLOSING, owner=o)),
    ("transition:initializing", lambda st, sid, o: st.transition(sid, S.INITIALIZING, owner=o)),
    ("activate", lambda st, sid, o: st.activate(sid, owner=o)),
    ("begin_close", lambda st, sid, o: st.begin_close(sid, owner=o)),
    ("close", lambda st, sid, o: st.close(sid, owner=o)),
    ("update_status:active", lambda st, sid, o: st.update_status(sid, S.ACTIVE, owner=o)),
    ("update_status:closing", lambda st, sid, o: st.update_status(sid, S.CLOSING, owner=o)),
    ("append_context", lambda st, sid, o: st.append_context(sid, ["hi"], owner=o)),
    (
        "append_context:expected_version",
        lambda st, sid, o: st.append_context(sid, ["hi"], owner=o, expected_version=2),
    ),
    ("update_attributes", lambda st, sid, o: st.update_attributes(sid, {"a": 1}, owner=o)),
    (
        "update_attributes:remove+expected_version",
        lambda st, sid, o: st.update_attributes(sid, {}, remove=["a"], owner=o, expected_version=2),
    ),
    (
        "record_tool_call",
        lambda st, sid, o: st.record_tool_call(sid, "call-1", "search", {"q": 1}, [1], 5, owner=o),
    ),
    (
        "record_tool_call:ttl",
        lambda st, sid, o: st.record_tool_call(
            sid, "call-1", "search", {"q": 1}, [1], 5, owner=o, ttl_seconds=60
        ),
    ),
    (
        "record_tool_call:recorded",  # the id the real owner already recorded
        lambda st, sid, o: st.record_tool_call(sid, "known", "search", {}, None, 1, owner=o),
    ),
    ("tool_calls", lambda st, sid, o: list(st.tool_calls(sid, owner=o))),
    ("load", lambda st, sid, o: st.load(sid, owner=o)),
]

#: (session's owner, caller's owner): every way of being the wrong owner.
WRONG = [("alice", "bob"), ("alice", None), (None, "bob")]


@dataclass
class Outcome:
    error: type[BaseException] | None
    message: str
    requests: int
    operations: dict[str, int]


def _observe(
    store: ss.SessionStore, log: RequestLog, call: Call, sid: str, owner: str | None
) -> Outcome:
    log.reset()
    try:
        call(store, sid, owner)
    except ss.SessionStoreError as exc:
        return Outcome(type(exc), str(exc).replace(sid, "<id>"), log.count, dict(log.counts()))
    return Outcome(None, "", log.count, dict(log.counts()))


def _store(client: Any, table: str, clock: ss.ManualClock, **kw: Any) -> ss.SessionStore:
    return ss.SessionStore(
        client,
        table,
        clock=clock,
        ids=ss.CounterIds("o"),
        retry=RetryPolicy(sleep=lambda _s: None),
        **kw,
    )


def _owned_session(store: ss.SessionStore, owner: str | None) -> str:
    sid = store.create_session(owner=owner).session_id
    store.activate(sid, owner=owner)
    store.append_context(sid, ["theirs"], owner=owner)
    store.record_tool_call(sid, "known", "search", {}, None, 1, owner=owner)
    return sid


@pytest.mark.parametrize(("real", "caller"), WRONG, ids=[f"{r}-vs-{c}" for r, c in WRONG])
@pytest.mark.parametrize(("name", "call"), ENTRY_POINTS, ids=[n for n, _ in ENTRY_POINTS])
def test_wrong_owner_looks_exactly_like_a_missing_session(
    client: Any,
    table: str,
    clock: ss.ManualClock,
    requests: RequestLog,
    name: str,
    call: Call,
    real: str | None,
    caller: str | None,
) -> None:
    warm = _store(client, table, clock)
    sid = _owned_session(warm, real)
    missing = sid[:-1] + "x"  # same length, so the messages line up
    before = scan(client, table)

    cold_foreign = _observe(_store(client, table, clock), requests, call, sid, caller)
    cold_missing = _observe(_store(client, table, clock), requests, call, missing, caller)
    assert cold_foreign.error is ss.SessionNotFound, cold_foreign
    assert cold_foreign == cold_missing  # type, message, request count, operations

    warm_foreign = _observe(warm, requests, call, sid, caller)
    warm_missing = _observe(warm, requests, call, missing, caller)
    assert (warm_foreign.error, warm_foreign.message, warm_foreign.requests) == (
        warm_missing.error,
        warm_missing.message,
        warm_missing.requests,
    )
    assert scan(client, table) == before  # nothing written by any of it


def test_expired_foreign_session_is_not_found_not_expired(
    client: Any, table: str, clock: ss.ManualClock, requests: RequestLog
) -> None:
    """Expiry is the owner's business: a stranger must not learn that the session expired."""
    store = _store(client, table, clock)
    sid = store.create_session(owner="alice", ttl_seconds=60).session_id
    clock.advance(seconds=61)
    for name, call in ENTRY_POINTS:
        foreign = _observe(_store(client, table, clock), requests, call, sid, "bob")
        missing = _observe(_store(client, table, clock), requests, call, sid[:-1] + "x", "bob")
        assert foreign == missing, name
        assert foreign.error is ss.SessionNotFound, name
    with pytest.raises(ss.SessionExpired):  # ...while the owner is told the truth
        store.get_session(sid, owner="alice")


def test_size_hint_does_not_leak_to_another_owner(
    client: Any, table: str, clock: ss.ManualClock, requests: RequestLog
) -> None:
    store = _store(client, table, clock, item_size_limit=ss.METADATA_OVERHEAD + 200)
    sid = store.create_session(owner="alice").session_id
    store.activate(sid, owner="alice")
    store.append_context(sid, ["x" * 150], owner="alice")  # the hint now says "nearly full"
    foreign = _observe(
        store, requests, lambda st, s, o: st.append_context(s, ["y" * 60], owner=o), sid, "bob"
    )
    missing = _observe(
        store,
        requests,
        lambda st, s, o: st.append_context(s, ["y" * 60], owner=o),
        sid[:-1] + "x",
        "bob",
    )
    assert (foreign.error, foreign.message, foreign.requests) == (
        missing.error,
        missing.message,
        missing.requests,
    )


def test_taken_id_is_refused_the_same_whoever_owns_it(
    client: Any, table: str, clock: ss.ManualClock, requests: RequestLog
) -> None:
    """create_session with an explicit, taken id must refuse (it can't create over it), so
    existence is visible to whoever knows the id -- ids are capabilities, 128 random bits.
    What must not leak is *whose* it is."""
    store = _store(client, table, clock)
    alices = store.create_session("taken-a", owner="alice").session_id
    nobodys = store.create_session("taken-b").session_id
    outcomes = [
        _observe(store, requests, lambda st, s, o: st.create_session(s, owner=o), sid, caller)
        for sid in (alices, nobodys)
        for caller in ("bob", None, "alice")
    ]
    assert {(o.error, o.message.replace("taken-a", "taken-b"), o.requests) for o in outcomes} == {
        (ss.SessionAlreadyExists, "session '<id>' already exists", 1)
    }


# ------------------------------------------------------------------ ids from the CSPRNG


def test_random_ids_draw_128_bits_from_the_os_csprng(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``secrets`` function ends in ``random._urandom`` (os.urandom); count what each id
    draws from it, and make sure the seeded Mersenne Twister plays no part."""
    drawn: list[int] = []
    real = random._urandom  # type: ignore[attr-defined]

    def spy(n: int) -> bytes:
        drawn.append(n)
        return bytes(real(n))

    monkeypatch.setattr(random, "_urandom", spy)
    ids = ss.RandomIds()
    per_id = []
    values = []
    for _ in range(1000):
        drawn.clear()
        values.append(ids.session_id())
        per_id.append(sum(drawn))
    assert min(per_id) >= 16, f"an id drew only {min(per_id)} bytes from os.urandom"
    assert len(set(values)) == len(values)

    random.seed(1)
    first = ss.RandomIds().session_id()
    random.seed(1)
    assert ss.RandomIds().session_id() != first  # not the seeded module-level generator


def test_generated_ids_can_hold_128_bits(client: Any, table: str) -> None:
    """The ids the store generates: alphabet ** length >= 2 ** 128, and the characters used
    look uniform (a crude check that the bits are not thrown away by the encoding)."""
    store = ss.SessionStore(client, table)
    generated = [store.ids.session_id() for _ in range(2000)]
    generated.append(store.create_session().session_id)
    alphabet = {c for i in generated for c in i}
    length = min(len(i) for i in generated)
    assert length * math.log2(len(alphabet)) >= 128, (length, sorted(alphabet))
    counts = [sum(i.count(c) for i in generated) for c in alphabet]
    expected = sum(counts) / len(alphabet)
    assert max(abs(c - expected) for c in counts) < 0.15 * expected
    assert all(ss.ids.validate_id(i, "session_id") == i for i in generated[:10])
