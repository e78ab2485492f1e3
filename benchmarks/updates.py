"""Phases 1 and 2: requests per committed write and committed writes per second.

Each run of the ``update`` and ``append`` works: a fresh session, ``writers`` threads, each
committing ``commits_per_writer`` updates through its contender. A run of the ``status`` work
(``run_status_once``): ``sessions`` fresh sessions in ``initializing``, made before the count
starts, and ``writers`` threads each advancing every session in turn until it sees it
``closed`` -- three legal moves per session, whoever makes them. Requests and condition failures
are read from botocore events on the contender's own client, the elapsed time is wall time from
a common start barrier until the last writer is done. After the run the final version must equal
the initial one plus the commits -- no lost updates, or the run is an error.

Contenders are interleaved: every repeat runs every contender in every scenario, in an order
rotated per repeat, so that a noisy machine slows them alike and the ratios hold.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import sessionstore as ss
from sessionstore.tutorial import source_design

from .contenders import (
    MOVES_PER_SESSION,
    Contender,
    PynamoDBContender,
    SessionStoreContender,
    SourceContender,
    pynamodb_update_status,
)
from .counting import CONDITION_FAILED, TRANSACTION_CANCELLED


@dataclass
class Scenario:
    name: str
    writers: int
    commits_per_writer: int
    latency_s: float = 0.0  # simulated network round trip per request
    work: str = "update"  # contenders.WORKS
    sessions: int = 0  # the ``status`` work: sessions walked per run (3 moves each)

    @property
    def planned_commits(self) -> int:
        if self.work == "status":
            return self.sessions * MOVES_PER_SESSION
        return self.writers * self.commits_per_writer


@dataclass
class Run:
    contender: str
    scenario: str
    repeat: int
    commits: int
    seconds: float
    requests: int
    by_operation: dict[str, int]
    failed_writes: int
    gave_up: int
    lost_updates: int
    requests_per_attempt: int
    client_cpu_s: float = 0.0  # CPU of the writer threads (botocore + library), not the engine
    timed_out: bool = False

    @property
    def per_second(self) -> float:
        return self.commits / self.seconds if self.seconds else 0.0

    @property
    def ms_per_request(self) -> float:
        return 1000 * self.seconds / self.requests if self.requests else 0.0

    @property
    def writes(self) -> int:
        writes = ("UpdateItem", "PutItem", "TransactWriteItems")
        return sum(n for op, n in self.by_operation.items() if op in writes)

    @property
    def wasted(self) -> int:
        # A failed attempt wastes its write and, for read-first loops, the read before it;
        # a sessionstore call that exhausts its attempts ends with one GetItem for the error.
        extra = self.gave_up if self.requests_per_attempt == 1 else 0
        return self.failed_writes * self.requests_per_attempt + extra


def _race(
    contender: Contender,
    scenario: Scenario,
    work: Callable[[int], None],
    barrier: threading.Barrier,
    stop_at: list[float],
    deadline_s: float,
) -> tuple[float, Any, Any]:
    """Run ``work(i)`` on one thread per writer, released together, bounded by ``deadline_s``:
    the seconds it took and the contender's counts."""
    threads = [
        threading.Thread(target=work, args=(i,), daemon=True) for i in range(scenario.writers)
    ]
    for t in threads:
        t.start()
    stop_at[0] = time.monotonic() + deadline_s
    t0 = time.perf_counter()
    barrier.wait(timeout=30)
    for t in threads:
        t.join(timeout=max(1.0, stop_at[0] - time.monotonic() + 10))
    seconds = time.perf_counter() - t0
    contender.set_latency(0)
    requests, failures = contender.counter.snapshot()
    return seconds, requests, failures


def run_once(contender: Contender, scenario: Scenario, repeat: int, *, deadline_s: float) -> Run:
    if scenario.work == "status":
        return run_status_once(contender, scenario, repeat, deadline_s=deadline_s)
    sid = contender.new_session()
    start_version = contender.version(sid)
    contender.set_latency(scenario.latency_s)
    commits = [contender.writer(sid, i, scenario.work) for i in range(scenario.writers)]
    done = [0] * scenario.writers
    gave_up = [0] * scenario.writers
    cpu = [0.0] * scenario.writers
    errors: list[BaseException] = []
    barrier = threading.Barrier(scenario.writers + 1)
    contender.counter.reset()
    stop_at = [0.0]

    def work(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            start = time.thread_time()
            for _ in range(scenario.commits_per_writer):
                if time.monotonic() > stop_at[0]:
                    break
                gave_up[i] += commits[i]()
                done[i] += 1
            cpu[i] = time.thread_time() - start
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    seconds, requests, failures = _race(contender, scenario, work, barrier, stop_at, deadline_s)
    if errors:
        raise RuntimeError(f"{contender.name}/{scenario.name}: {errors[0]!r}") from errors[0]
    committed = sum(done)
    lost = start_version + committed - contender.version(sid)
    return Run(
        contender=contender.name,
        scenario=scenario.name,
        repeat=repeat,
        commits=committed,
        seconds=seconds,
        requests=sum(requests.values()),
        by_operation=dict(requests),
        failed_writes=failures[CONDITION_FAILED] + failures[TRANSACTION_CANCELLED],
        gave_up=sum(gave_up),
        lost_updates=lost,
        requests_per_attempt=contender.requests_per_attempt,
        client_cpu_s=sum(cpu),
        timed_out=committed < scenario.planned_commits,
    )


def run_status_once(
    contender: Contender, scenario: Scenario, repeat: int, *, deadline_s: float
) -> Run:
    """Every writer walks the same ``scenario.sessions`` fresh sessions in order, advancing each
    (one legal move per commit) until it sees it ``closed``; they race for every move. After the
    run every session must be ``closed`` at its start version + 3, and the writers' own commits
    must add up to the versions' growth."""
    sids = [contender.new_walk_session() for _ in range(scenario.sessions)]
    start = {sid: contender.version(sid) for sid in sids}
    contender.set_latency(scenario.latency_s)
    writers = [contender.status_writer(i) for i in range(scenario.writers)]
    done = [0] * scenario.writers
    gave_up = [0] * scenario.writers
    cpu = [0.0] * scenario.writers
    late = [False] * scenario.writers
    errors: list[BaseException] = []
    barrier = threading.Barrier(scenario.writers + 1)
    contender.counter.reset()
    stop_at = [0.0]

    def work(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            t = time.thread_time()
            calls = 0
            for sid in sids:
                while not late[i]:
                    if time.monotonic() > stop_at[0]:
                        late[i] = True
                        break
                    calls += 1
                    if calls > MAX_STATUS_CALLS:
                        raise RuntimeError(f"writer {i}: {calls} calls for {len(sids)} sessions")
                    step = writers[i](sid)
                    done[i] += step.committed
                    gave_up[i] += step.gave_up
                    if step.closed:
                        break
            cpu[i] = time.thread_time() - t
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    seconds, requests, failures = _race(contender, scenario, work, barrier, stop_at, deadline_s)
    if errors:
        raise RuntimeError(f"{contender.name}/{scenario.name}: {errors[0]!r}") from errors[0]
    committed = sum(done)
    grown = {sid: contender.version(sid) - start[sid] for sid in sids}
    timed_out = any(late)
    if not timed_out:
        wrong = [
            sid
            for sid in sids
            if grown[sid] != MOVES_PER_SESSION or contender.status(sid) != "closed"
        ]
        if wrong:
            raise RuntimeError(
                f"{contender.name}/{scenario.name}: {len(wrong)} sessions not closed in "
                f"{MOVES_PER_SESSION} version bumps: {wrong[:3]}"
            )
    return Run(
        contender=contender.name,
        scenario=scenario.name,
        repeat=repeat,
        commits=committed,
        seconds=seconds,
        requests=sum(requests.values()),
        by_operation=dict(requests),
        failed_writes=failures[CONDITION_FAILED] + failures[TRANSACTION_CANCELLED],
        gave_up=sum(gave_up),
        lost_updates=committed - sum(grown.values()),
        requests_per_attempt=contender.requests_per_attempt,
        client_cpu_s=sum(cpu),
        timed_out=timed_out,
    )


#: A status writer's bound on calls in one run (never reached in practice).
MAX_STATUS_CALLS = 5000


@dataclass
class Summary:
    contender: str
    scenario: str
    runs: int
    commits: int
    per_second_median: float
    per_second_min: float
    per_second_max: float
    requests_per_commit: float
    requests_per_commit_min: float
    requests_per_commit_max: float
    attempts_per_commit: float
    wasted_per_commit: float
    wasted_total: int
    gave_up: int
    lost_updates: int
    timed_out_runs: int
    ms_per_request: float
    client_cpu_ms_per_commit: float
    by_operation: dict[str, int] = field(default_factory=dict)


def summarize(runs: list[Run]) -> list[Summary]:
    out: list[Summary] = []
    keys = sorted({(r.scenario, r.contender) for r in runs}, key=lambda k: (k[0], k[1]))
    for scenario, contender in keys:
        rs = [r for r in runs if r.scenario == scenario and r.contender == contender]
        commits = sum(r.commits for r in rs)
        rates = [r.per_second for r in rs]
        rpc = [r.requests / r.commits for r in rs if r.commits]
        ops: dict[str, int] = {}
        for r in rs:
            for op, n in r.by_operation.items():
                ops[op] = ops.get(op, 0) + n
        out.append(
            Summary(
                contender=contender,
                scenario=scenario,
                runs=len(rs),
                commits=commits,
                per_second_median=statistics.median(rates),
                per_second_min=min(rates),
                per_second_max=max(rates),
                # pooled over the runs: total requests / total commits (and per-run min/max)
                requests_per_commit=sum(r.requests for r in rs) / commits if commits else 0.0,
                requests_per_commit_min=min(rpc) if rpc else 0.0,
                requests_per_commit_max=max(rpc) if rpc else 0.0,
                attempts_per_commit=sum(r.writes for r in rs) / commits if commits else 0.0,
                wasted_per_commit=sum(r.wasted for r in rs) / commits if commits else 0.0,
                wasted_total=sum(r.wasted for r in rs),
                gave_up=sum(r.gave_up for r in rs),
                lost_updates=sum(r.lost_updates for r in rs),
                timed_out_runs=sum(r.timed_out for r in rs),
                ms_per_request=statistics.median(r.ms_per_request for r in rs),
                client_cpu_ms_per_commit=statistics.median(
                    1000 * r.client_cpu_s / r.commits for r in rs if r.commits
                )
                if commits
                else 0.0,
                by_operation=ops,
            )
        )
    return out


def run_all(
    contenders: list[Contender],
    scenarios: list[Scenario],
    repeats: int,
    *,
    run_deadline_s: float,
    phase_deadline: float,
    progress: Any,
) -> list[Run]:
    runs: list[Run] = []
    for rep in range(repeats):
        if time.monotonic() > phase_deadline and rep >= 1:
            progress(f"  updates: phase time budget reached after {rep} repeats")
            break
        order = contenders[rep % len(contenders) :] + contenders[: rep % len(contenders)]
        for scenario in scenarios:
            for contender in order:
                if contender.contended_only and scenario.writers == 1:
                    continue
                runs.append(run_once(contender, scenario, rep, deadline_s=run_deadline_s))
        progress(
            f"  repeat {rep + 1}/{repeats}: "
            + ", ".join(
                f"{r.contender}/{r.scenario} {r.per_second:.0f}/s" for r in runs if r.repeat == rep
            )
        )
    return runs


# ---------------------------------------------------------------- the lifecycle, deterministic


@dataclass
class StatusWalk:
    contender: str
    moves: int
    requests: int
    by_operation: dict[str, int]

    @property
    def requests_per_move(self) -> float:
        return self.requests / self.moves


def status_walks(
    ours: SessionStoreContender,
    source: SourceContender,
    pynamo: PynamoDBContender,
    sessions: int = 5,
) -> list[StatusWalk]:
    """``initializing -> active -> closing -> closed`` on ``sessions`` sessions, uncontended:
    the actual status API of each contender (3 moves per session)."""
    walk = [ss.Status.ACTIVE, ss.Status.CLOSING, ss.Status.CLOSED]
    out: list[StatusWalk] = []

    def measure(name: str, step: Any) -> None:
        counter = ours.counter
        sids = [ours.setup.create_session().session_id for _ in range(sessions)]
        counter.reset()
        for sid in sids:
            for status in walk:
                step(sid, status)
        requests, _ = counter.snapshot()
        out.append(StatusWalk(name, sessions * len(walk), sum(requests.values()), dict(requests)))

    warm = ss.SessionStore(ours.client, ours.table)

    # update_status from a store that already knows the version (the common case in one
    # server instance): pre-load the hint outside the count.
    sids = [ours.setup.create_session().session_id for _ in range(sessions)]
    for sid in sids:
        warm.get_session(sid)
    ours.counter.reset()
    for sid in sids:
        for status in walk:
            warm.update_status(sid, status)
    requests, _ = ours.counter.snapshot()
    out.append(
        StatusWalk(
            "sessionstore update_status (warm hint)",
            sessions * 3,
            sum(requests.values()),
            dict(requests),
        )
    )

    measure(
        "sessionstore update_status (cold: new instance per move)",
        lambda sid, st: ss.SessionStore(ours.client, ours.table).update_status(sid, st),
    )
    measure(
        "sessionstore transition (no read, cold)",
        lambda sid, st: ss.SessionStore(ours.client, ours.table).transition(sid, st),
    )

    # the source loop and PynamoDB: statuses written as plain strings (no lifecycle check)
    for contender, name in (
        (source, "source update_session_status"),
        (pynamo, "pynamodb get + update (VersionAttribute)"),
    ):
        sids = [contender.new_session() for _ in range(sessions)]
        contender.counter.reset()
        for sid in sids:
            for status in walk:
                if contender is source:
                    source_design.update_session_status(
                        source.client, sid, status.value, table=source.table
                    )
                else:
                    pynamodb_update_status(pynamo.model, sid, status.value)
        requests, _ = contender.counter.snapshot()
        out.append(StatusWalk(name, sessions * 3, sum(requests.values()), dict(requests)))
    return out


def as_dicts(items: list[Any]) -> list[dict[str, Any]]:
    return [asdict(i) for i in items]
