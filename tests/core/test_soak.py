"""Concurrency soak: threads and processes against one embedded engine, every ack audited.

The fast variants run in ``make test``; the ``soak``-marked ones (``make soak``) run longer.
Figures are printed (visible with ``-s``, which ``make soak`` sets) and recorded as junit
properties (``record_property``).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

import sessionstore as ss
from sessionstore.conditions import item_to_wire
from sessionstore.context import IN_FLIGHT_S
from sessionstore.item import new_item
from sessionstore.local import LocalDynamoDB
from sessionstore.testing import Fault, FaultInjector
from tests.support.soak import (
    SoakPlan,
    SoakResult,
    audit,
    context_digest,
    read_contexts,
    run_threads,
    scan_table,
)

FAULTS = {
    Fault.LOST_RESPONSE.value: 0.1,
    Fault.THROTTLE.value: 0.1,
    # What real DynamoDB sends and moto never does (issue 9): provably unapplied, retried.
    Fault.TRANSACTION_CONFLICT.value: 0.05,
    Fault.TRANSACTION_THROTTLED.value: 0.05,
}
_tables = itertools.count(1)


def _soak(
    engine: LocalDynamoDB,
    *,
    threads: int,
    processes: int,
    sessions: int,
    ops: int,
    deadline_s: float,
    faults: dict[str, float] | None = None,
    seed: int = 1,
    idle_sessions: int = 0,
) -> SoakResult:
    endpoint = engine.endpoint_url
    admin = ss.connect(endpoint)
    table = f"soak{next(_tables)}"
    ss.SessionStore(admin, table).create_table()
    plan = SoakPlan(
        table=table,
        session_ids=tuple(f"soak-{i}" for i in range(sessions)),
        ops=ops,
        deadline_s=deadline_s,
        seed=seed,
        fault_rates=dict(faults or {}),
        idle_sessions=idle_sessions,
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.support.soak", endpoint, f"p{i}", plan.to_json()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(processes)
    ]
    try:
        for proc in procs:  # every process is connected before anybody starts
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        client = ss.connect(endpoint)  # one client and one store shared by all the threads
        store = ss.SessionStore(client, table)
        injector = (
            FaultInjector(client, rates=plan.injector_rates(), seed=seed).attach()
            if faults
            else None
        )
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reports = run_threads(store, plan, threads, injector=injector)
        assert len(reports) == threads, "a thread did not finish"
        for proc in procs:
            out, err = proc.communicate(timeout=deadline_s + 60)
            assert proc.returncode == 0, err[-2000:]
            reports.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if injector is not None:
        injector.detach()
    # The contexts through the read API: now, and once the in-flight window of any hole an
    # interrupted append left has passed (then the hole is skipped, not waited for).
    now = read_contexts(ss.SessionStore(admin, table), plan.session_ids)
    later_clock = ss.ManualClock(ss.SystemClock().now_ms() + (IN_FLIGHT_S + 1) * 1000)
    later = read_contexts(ss.SessionStore(admin, table, clock=later_clock), plan.session_ids)
    result = audit(
        reports,
        scan_table(admin, table),
        contexts=later,
        faults=injector.summary() if injector else None,
    )
    for sid, shown in now.items():
        if later.get(sid, [])[: len(shown)] != shown:
            result.violations.append(f"{sid}: the context read now is not a prefix of later's")
    return result


def _check(result: SoakResult, record_property: Any, *, faults: bool) -> None:
    print(result)
    record_property("soak", json.dumps(result.figures(), sort_keys=True))
    assert result.violations == []
    assert (result.untyped_exceptions, result.duplicates, result.losses, result.phantoms) == (
        0,
        0,
        0,
        0,
    )
    assert result.version_mismatches == result.forbidden == result.record_mismatches == 0
    # Idle sessions: none accepted a write once idle past its timeout, and each was refused.
    assert result.idle_expired_writes == 0
    if result.idle_sessions:
        assert result.idle_refusals > 0 and result.errors["SessionExpired"] > 0
    # The soak did what it claims: every kind of call, contention, duplicate tool_call_ids.
    assert set(result.by_operation) >= {
        "create_session",
        "transition",
        "update_status",
        "append_context",
        "record_tool_call",
    }
    assert result.errors["SessionAlreadyExists"] > 0
    assert result.acked_messages > 0 and result.tool_records > 0
    assert result.acked_messages == result.stored_messages or faults
    if faults:
        assert result.faults["lost_response"] > 0 and result.faults["throttle"] > 0
        assert result.faults["transaction_conflict"] > 0
        assert result.faults["transaction_throttled"] > 0


def test_soak_fast(engine: LocalDynamoDB, record_property: Any) -> None:
    """6 threads + 3 processes, 6 shared sessions (2 of them expiring when idle), no faults.
    Bounded by the workers' own deadline (a worker past it stops) and the test timeout, never
    by an assertion on time."""
    result = _soak(
        engine, threads=6, processes=3, sessions=6, ops=20, deadline_s=12, idle_sessions=2
    )
    _check(result, record_property, faults=False)
    assert result.idle_sessions == 2


def test_soak_fast_with_lost_responses_and_throttles(
    engine: LocalDynamoDB, record_property: Any
) -> None:
    """The same with 10 % lost responses, 10 % throttles, 5 % transaction conflicts and 5 %
    transactions cancelled by throttling on every client."""
    result = _soak(
        engine,
        threads=6,
        processes=3,
        sessions=6,
        ops=16,
        deadline_s=14,
        faults=FAULTS,
        seed=2,
        idle_sessions=2,
    )
    _check(result, record_property, faults=True)


@pytest.mark.soak
@pytest.mark.parametrize("faults", [None, FAULTS], ids=["clean", "faults"])
def test_soak_long(
    engine: LocalDynamoDB, record_property: Any, faults: dict[str, float] | None
) -> None:
    """``make soak``: 12 threads + 6 processes, 8 sessions (2 expiring when idle), up to 300
    calls each, 120 s cap per worker (both variants together stay under 5 minutes)."""
    result = _soak(
        engine,
        threads=12,
        processes=6,
        sessions=8,
        ops=300,
        deadline_s=120,
        faults=faults,
        seed=3,
        idle_sessions=2,
    )
    _check(result, record_property, faults=faults is not None)


def test_audit_catches_losses_duplicates_and_forbidden_moves() -> None:
    """The auditor itself: feed it a doctored table and hand-made acknowledgements."""
    from boto3.dynamodb.types import TypeSerializer

    ser = TypeSerializer()

    def item(**attrs: Any) -> dict[str, Any]:
        return {k: ser.serialize(v) for k, v in attrs.items()}

    events = [
        {
            "op": "create_session",
            "sid": "a",
            "seq": 0,
            "ok": True,
            "version": 1,
            "status": "initializing",
        },
        {
            "op": "transition",
            "sid": "a",
            "seq": 1,
            "ok": True,
            "to": "active",
            "version": 2,
            "status": "active",
        },
        {
            "op": "append_context",
            "sid": "a",
            "seq": 2,
            "ok": True,
            "msgs": ["m1"],
            "version": 3,
            "status": "active",
        },
        {
            "op": "append_context",
            "sid": "a",
            "seq": 3,
            "ok": True,
            "msgs": ["m2"],
            "version": 4,
            "status": "active",
        },
        {
            "op": "transition",
            "sid": "a",
            "seq": 4,
            "ok": False,
            "error": "InvalidTransition",
            "to": "active",
            "current": "closed",
        },
    ]
    table = [
        # m2 lost, m1 duplicated, version off, and back in "initializing" after "active"
        item(
            pk="session#a",
            sk="metadata",
            version=9,
            status="initializing",
            messageCount=2,
        ),
        item(pk="session#a", sk="msg#000000000000", first=0, messages=['{"m":"m1"}'], ttl=9),
        item(pk="session#a", sk="msg#000000000001", first=1, messages=['{"m":"m1"}'], ttl=9),
    ]
    result = audit([{"worker": "w", "events": events}], table, contexts={"a": ["m1", "m1"]})
    assert (result.losses, result.duplicates) == (1, 1)
    assert result.version_mismatches == 1
    assert result.forbidden >= 2  # active -> initializing, and closed -> initializing
    assert Counter(result.errors) == {"InvalidTransition": 1}
    assert not any("not the pages'" in v for v in result.violations)
    # A reader that disagrees with the pages, a worker's appends out of its order, a hole no
    # failed append explains, and a load that showed what the end does not start with:
    table[2] = item(pk="session#a", sk="msg#000000000001", first=1, messages=['{"m":"m2"}'], ttl=9)
    table[0]["messageCount"] = ser.serialize(3)
    events.append(
        {
            "op": "load",
            "sid": "a",
            "seq": 5,
            "ok": True,
            "version": 4,
            "status": "active",
            "records": [],
            "context_len": 1,
            "context_digest": context_digest(["m1"]),
        }
    )
    result = audit([{"worker": "w", "events": events}], table, contexts={"a": ["m2", "m1"]})
    found = "\n".join(result.violations)
    assert "is not the pages'" in found
    assert "stored before its earlier appends" in found
    assert "1 in holes" in found
    assert "not a prefix of the end" in found


# ------------------------------------------------------------- targeted lost-response races
# A lost response is retried by botocore itself (standard mode), after a backoff of up to a
# second, so the store never learns that an attempt was ambiguous. Whatever a rival writes in
# that window decides whether the store can still recognise its own landed write.


def test_audit_catches_a_write_accepted_on_an_idle_expired_session() -> None:
    """The idle check itself: a write acknowledged when no write had landed for longer than the
    idle timeout is a violation; one within it, or after an ambiguous write, is not."""
    item = new_item(
        "a",
        None,
        "2026-01-01T12:00:00.000Z",
        1_767_268_800 + 3600,
        "tk",
        0,
        0,
        2,
        1_767_268_800 + 2,
    )
    base = 1_767_268_800_000

    def event(op: str, t0: int, t1: int, ok: bool = True, **more: Any) -> dict[str, Any]:
        return {"op": op, "sid": "a", "seq": 0, "ok": ok, "t0": base + t0, "t1": base + t1, **more}

    created = event("create_session", 0, 10)
    cases = {
        "in time": ([created, event("transition", 1500, 1600, to="active")], 0),
        "too late": ([created, event("transition", 2500, 2600, to="active")], 1),
        "after a refused write": (
            [
                created,
                event("transition", 1900, 1950, False, error="SessionExpired"),
                event("transition", 2500, 2600, to="active"),
            ],
            1,
        ),
        "after an ambiguous write": (
            [
                created,
                event("transition", 1500, 1950, False, error="Unavailable", ambiguous=True),
                event("transition", 2500, 2600, to="active"),
            ],
            0,
        ),
    }
    for name, (events, expected) in cases.items():
        result = audit(
            [{"worker": "w", "events": events}], [item_to_wire(item)], contexts={"a": []}
        )
        assert (result.idle_sessions, result.idle_expired_writes) == (1, expected), name


def _rival(engine: LocalDynamoDB, table: str, clock: ss.ManualClock) -> ss.SessionStore:
    return ss.SessionStore(ss.connect(engine.endpoint_url), table, clock=clock)


def test_lost_transition_is_never_reported_as_refused(
    engine: LocalDynamoDB,
    client: Any,
    table: str,
    clock: ss.ManualClock,
    store: ss.SessionStore,
) -> None:
    """Found by this harness: transition() proved a landed attempt only through one `lastTx`
    attribute, which a rival transition overwrote, so the landed activation was reported as
    InvalidTransition(closing -> active). Fixed in the store: a token per target status."""
    sid = store.create_session(owner="alice").session_id
    rival = _rival(engine, table, clock)
    with FaultInjector(
        client,
        script=[Fault.LOST_RESPONSE],
        after_lost=lambda _op: rival.begin_close(sid, owner="alice"),
    ) as faults:
        try:
            outcome: Any = store.activate(sid, owner="alice")
        except ss.SessionStoreError as exc:
            outcome = exc
    assert faults.injected[Fault.LOST_RESPONSE] == 1
    now = store.get_session(sid, owner="alice")
    assert now.version == 3 and now.status is ss.Status.CLOSING  # initializing->active->closing
    # The activation landed: success, or at worst "maybe applied" -- never "refused".
    assert isinstance(outcome, ss.Session) or (
        isinstance(outcome, ss.Unavailable) and outcome.maybe_applied
    ), repr(outcome)


def test_lost_append_is_settled_however_many_writes_came_in_between(
    engine: LocalDynamoDB,
    client: Any,
    table: str,
    clock: ss.ManualClock,
    store: ss.SessionStore,
    active: ss.Session,
) -> None:
    """Found by this harness: with 16 or more versioned writes between a lost attempt and
    botocore's own retry, the version-keyed ring of slots that the store used then no longer
    showed the attempt, and the append landed twice (later: ended ``Unavailable``). Every write
    now names its token in ``tk``, where no number of writes in between can hide it: the
    re-sent copy is refused, the refusal shows the token, and the append succeeds, once."""
    sid = active.session_id
    rival = _rival(engine, table, clock)

    def sixteen_rival_appends(_op: str) -> None:
        for i in range(16):
            rival.append_context(sid, [f"rival-{i}"], owner="alice")

    with FaultInjector(
        client,
        script=[Fault.LOST_RESPONSE],
        operations=["UpdateItem"],
        after_lost=sixteen_rival_appends,
    ):
        try:
            outcome: Any = store.append_context(sid, ["mine"], owner="alice")
        except ss.SessionStoreError as exc:
            outcome = exc
    clock.advance(seconds=IN_FLIGHT_S + 1)  # a hole the append may have left is skipped
    context = list(store.context(sid, owner="alice"))
    assert context.count("mine") == 1, f"{context.count('mine')} copies; outcome {outcome!r}"
    assert sorted(context) == sorted(["mine", *(f"rival-{i}" for i in range(16))])
    assert isinstance(outcome, ss.Session), outcome


def test_fault_injector_counts_per_thread_and_runs_after_lost(
    store: ss.SessionStore, client: Any
) -> None:
    import threading

    seen: list[str] = []
    injector = FaultInjector(
        client, script=[Fault.LOST_RESPONSE, Fault.THROTTLE], after_lost=seen.append
    )
    with injector:
        session = store.create_session()  # lost, then throttled, then through: 3 attempts
        other: list[Counter[Fault]] = []
        worker = threading.Thread(target=lambda: other.append(injector.injected_in_thread()))
        worker.start()
        worker.join()
    assert session.version == 1
    assert seen == ["PutItem"]
    assert injector.injected_in_thread() == {Fault.LOST_RESPONSE: 1, Fault.THROTTLE: 1}
    assert other == [Counter()]
    assert injector.summary() == {
        "passed": 1,
        "lost_response": 1,
        "throttle": 1,
        "throttle_provisioned": 0,
        "server_error": 0,
        "transaction_conflict": 0,
        "transaction_throttled": 0,
    }
    assert injector.by_operation == {
        ("PutItem", Fault.LOST_RESPONSE): 1,
        ("PutItem", Fault.THROTTLE): 1,
    }
