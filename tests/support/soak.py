"""A bounded concurrency soak: many workers, a few shared sessions, every acknowledgement audited.

Each worker (a thread sharing a store, or a process with its own) first tries to create every
shared session, then runs a seeded random mix of store calls (``OPS``; tool_call_ids come from a
small shared pool, so several workers record the same id at once). Each call's event holds what
it asked, its answer or error, its start and end on the store's clock (``t0``, ``t1``), and
whether a lost response was injected into it (``ambiguous``: it may have landed, yet raised).

``audit`` then compares the acknowledgements with the table (a full Scan) and with each
session's context as ``read_contexts`` returns it:

* every acknowledged append's messages are in the context exactly once, contiguously, and no
  message of a definitely-refused append is there; an append that said ``maybe_applied=False``
  stored nothing; each worker's appends are in the order it made them;
* the context read equals the page items' messages in key order; the seqs reserved and not
  stored are holes left by appends that raised ``Unavailable``;
* every context a ``load`` showed is a prefix of the final one;
* ``version == 1 + appends that reserved + status changes`` (the lifecycle is acyclic, so each
  status is entered at most once);
* exactly one recorded ``tool#<id>`` item per tool_call_id, the union of the acknowledged ids,
  each as acknowledged;
* no forbidden move, in what each worker observed or in the final status;
* no write acknowledged on a session idle past its timeout (``_audit_idle``). The idle sessions
  (the last ``SoakPlan.idle_sessions`` of ``session_ids``) are left alone after
  ``idle_quiet_s``, then written to again by every worker, which must be refused.

Loops are bounded in count *and* time. ``python -m tests.support.soak`` runs one worker
process: it prints ``ready``, waits for a line on stdin, runs, and prints its report as JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from sessionstore.codec import JSON
from sessionstore.context import read_context, recent_reservations
from sessionstore.errors import (
    InvalidTransition,
    SessionExpired,
    SessionNotActive,
    SessionStoreError,
    ToolCallConflict,
    Unavailable,
    VersionConflict,
)
from sessionstore.item import session_from_item
from sessionstore.lifecycle import TRANSITIONS
from sessionstore.models import Loaded, Session, Status, ToolCallRecord
from sessionstore.schema import META_SK, PAGES_END, pk
from sessionstore.testing.faults import Fault, FaultInjector

_DESER = TypeDeserializer()

OPS: dict[str, int] = {  # weights of the random mix
    "append_context": 38,
    "record_tool_call": 26,
    "transition": 14,
    "update_status": 10,
    "get_session": 6,
    "load": 6,
}
#: Targets before and after the "closing phase" (``close_after`` of a worker's operations).
EARLY_TARGETS = [Status.ACTIVE] * 8 + [Status.INITIALIZING, Status.CLOSED]
LATE_TARGETS = (
    [Status.ACTIVE] * 2 + [Status.INITIALIZING] + [Status.CLOSING] * 3 + [Status.CLOSED] * 3
)


@dataclass(frozen=True)
class SoakPlan:
    table: str
    session_ids: tuple[str, ...]
    ops: int = 40  # per worker, creates not included
    deadline_s: float = 20.0  # per worker
    tool_ids: int = 10  # tool_call_ids per session, shared by every worker
    close_after: float = 0.7
    conflicting_payloads: float = 0.05  # share of record calls that send a different payload
    seed: int = 0
    fault_rates: dict[str, float] = field(default_factory=dict)  # Fault.value -> rate
    idle_sessions: int = 0  # the last ones of session_ids expire when idle for idle_seconds
    idle_seconds: int = 2
    idle_quiet_s: float = 3.0  # into its run, a worker leaves the idle sessions alone

    @property
    def idle_ids(self) -> tuple[str, ...]:
        return self.session_ids[len(self.session_ids) - self.idle_sessions :]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> SoakPlan:
        raw = json.loads(text)
        return cls(**{**raw, "session_ids": tuple(raw["session_ids"])})

    def injector_rates(self) -> dict[Fault, float]:
        return {Fault(k): v for k, v in self.fault_rates.items()}


def reachable(status: Status) -> set[Status]:
    """``status`` and every status the lifecycle table can lead to from it."""
    seen = {status}
    todo = [status]
    while todo:
        for nxt in TRANSITIONS[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def tool_payload(session_id: str, n: int, variant: str | None = None) -> dict[str, Any]:
    """The canonical payload of tool call ``n`` (a variant differs only in ``output``)."""
    output: dict[str, Any] = {"ok": True, "square": n * n, "ratio": n / 7}
    if variant is not None:
        output["variant"] = variant
    return {
        "tool_call_id": f"{session_id}.call-{n:03d}",
        "tool_name": f"tool-{n % 3}",
        "input": {"n": n, "text": f"caf\u00e9 #{n}", "float": 0.1 * n},
        "output": output,
        "duration_ms": n,
    }


def _message_ids(messages: Iterable[JSON]) -> list[str]:
    """The soak's messages are ``{"m": <worker/op/k>, "x": ...}``: their ids, in order."""
    return [str(m["m"]) if isinstance(m, dict) else repr(m) for m in messages]


def context_digest(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def read_contexts(store: Any, session_ids: Iterable[str]) -> dict[str, list[str]]:
    """Each session's context through ``store.context``, as message ids; sessions that do not
    exist are left out. ``store``'s clock should be past the in-flight window
    (``context.IN_FLIGHT_S``) of the last append, so a hole an interrupted append left is
    skipped rather than read as an append still in flight."""
    out: dict[str, list[str]] = {}
    for sid in session_ids:
        try:
            out[sid] = _message_ids(store.context(sid))
        except SessionExpired:  # idle past its timeout, still stored: the same reader, unchecked
            items = list(store.table.query(pk(sid), META_SK, PAGES_END))
            now_s = store.clock.now_ms() // 1000
            recent = recent_reservations(items[0], now_s)
            texts = read_context(session_from_item(items[0]), items[1:], None, now_s, recent)
            out[sid] = _message_ids(json.loads(text) for _, text in texts)
        except SessionStoreError:
            continue
    return out


def _record_fields(record: ToolCallRecord) -> dict[str, Any]:
    names = ("tool_call_id", "tool_name", "input", "output", "duration_ms", "recorded_at")
    return {name: getattr(record, name) for name in names}


def run_worker(
    store: Any,
    plan: SoakPlan,
    worker: str,
    *,
    injector: FaultInjector | None = None,
    report_faults: bool = True,
) -> dict[str, Any]:
    """One worker's share of the soak; returns its report (JSON-serialisable). ``injector`` (on
    the store's client) tells which calls met a lost response; its totals go into the report
    unless ``report_faults`` is false (a shared injector is reported once, by the caller)."""
    rng = random.Random(f"{plan.seed}/{worker}")
    events: list[dict[str, Any]] = []
    stop = time.monotonic() + plan.deadline_s
    started = time.monotonic()

    def call(op: str, sid: str, fn: Any, *args: Any, **info: Any) -> None:
        lost_before = injector.injected_in_thread()[Fault.LOST_RESPONSE] if injector else 0
        event: dict[str, Any] = {"op": op, "sid": sid, "seq": len(events), **info}
        result: Any = None
        event["t0"] = store.clock.now_ms()
        try:
            result = fn(*args)
        except Exception as exc:
            event["error"] = type(exc).__name__
            if not isinstance(exc, SessionStoreError):  # the soak counts these; there must be none
                event["untyped"] = repr(exc)[:500]
            if isinstance(exc, InvalidTransition | SessionNotActive):
                event["current"] = exc.current.value
            if isinstance(exc, VersionConflict):
                event["current"] = exc.current.status.value
                event["current_version"] = exc.current.version
            if isinstance(exc, Unavailable):
                event["maybe_applied"] = exc.maybe_applied
                event["message"] = str(exc)[:300]
            if isinstance(exc, ToolCallConflict) and exc.stored is not None:
                event["stored"] = _record_fields(exc.stored)
        event["ok"] = "error" not in event
        event["t1"] = store.clock.now_ms()
        if injector is not None:
            event["ambiguous"] = injector.injected_in_thread()[Fault.LOST_RESPONSE] > lost_before
        if isinstance(result, Loaded):
            event["records"] = [r.tool_call_id for r in result.tool_calls]
            # What the load showed, compactly: the final context must start with it.
            event["context_len"] = len(result.context)
            event["context_digest"] = context_digest(_message_ids(result.context))
            result = result.session
        if isinstance(result, Session):
            event.update(version=result.version, status=result.status.value)
        elif isinstance(result, ToolCallRecord):
            event["record"] = _record_fields(result)
        events.append(event)

    def record(sid: str, n: int, variant: str | None) -> None:
        payload = tool_payload(sid, n, variant)
        fn = partial(store.record_tool_call, sid, **payload)
        call("record_tool_call", sid, fn, tool_call_id=payload["tool_call_id"], variant=variant)

    order = list(plan.session_ids)
    rng.shuffle(order)
    idle_ids = set(plan.idle_ids)
    for sid in order:
        if time.monotonic() > stop:
            break
        idle = plan.idle_seconds if sid in idle_ids else None
        call("create_session", sid, partial(store.create_session, sid, idle_seconds=idle))

    fixed_ids = [s for s in plan.session_ids if s not in idle_ids] or list(plan.session_ids)
    for i in range(plan.ops):
        if time.monotonic() > stop:
            break
        sid = rng.choice(plan.session_ids)
        if sid in idle_ids and time.monotonic() - started >= plan.idle_quiet_s:
            sid = rng.choice(fixed_ids)  # the idle sessions are left alone from now on
        op = rng.choices(list(OPS), list(OPS.values()))[0]
        late = (  # by count, or by time when the deadline is what ends the run
            i >= plan.ops * plan.close_after
            or time.monotonic() - started >= plan.deadline_s * plan.close_after
        )
        if op in ("transition", "update_status"):
            targets = LATE_TARGETS if late else EARLY_TARGETS
            if not late and sid == plan.session_ids[-1]:
                targets = [*targets, Status.CLOSING]  # one session may skip "active"
            to = rng.choice(targets)
            call(op, sid, getattr(store, op), sid, to, to=to.value)
        elif op == "append_context":
            messages = [
                {"m": f"{worker}/{i}/{k}", "x": rng.random()} for k in range(rng.randint(1, 3))
            ]
            call(op, sid, store.append_context, sid, messages, msgs=[m["m"] for m in messages])
        elif op == "record_tool_call":
            n = rng.randrange(plan.tool_ids)
            record(sid, n, worker if rng.random() < plan.conflicting_payloads else None)
        else:  # get_session, load
            call(op, sid, getattr(store, op), sid)

    if idle_ids:
        # Back once every idle session has had no write for longer than its timeout (plus a
        # second for the other workers' start and their last requests): refused, each one.
        back = plan.idle_quiet_s + plan.idle_seconds + 1.5
        time.sleep(max(0.0, back - (time.monotonic() - started)))
        for sid in sorted(idle_ids):
            back_id = f"{worker}/back"
            call("append_context", sid, store.append_context, sid, [{"m": back_id}], msgs=[back_id])
            record(sid, 0, None)
            call("transition", sid, store.transition, sid, Status.CLOSED, to=Status.CLOSED.value)

    report: dict[str, Any] = {
        "worker": worker,
        "events": events,
        "elapsed_s": round(time.monotonic() - started, 3),
        "timed_out": time.monotonic() > stop,
    }
    if injector is not None and report_faults:
        report["faults"] = injector.summary()
    return report


# ---------------------------------------------------------------------------------- audit


@dataclass
class SoakResult:
    workers: int = 0
    operations: int = 0
    acknowledged: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    by_operation: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    ambiguous_calls: int = 0
    applied_but_refused: int = 0
    unavailable: Counter[str] = field(default_factory=Counter)  # message -> count
    untyped_exceptions: int = 0
    duplicates: int = 0
    losses: int = 0
    phantoms: int = 0
    version_mismatches: int = 0
    forbidden: int = 0
    record_mismatches: int = 0
    idle_sessions: int = 0
    idle_expired_writes: int = 0  # writes acknowledged on a session idle past its timeout
    idle_refusals: int = 0  # writes refused as SessionExpired on an idle session
    acked_messages: int = 0
    stored_messages: int = 0
    tool_records: int = 0
    final_status: dict[str, str] = field(default_factory=dict)
    final_version: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0
    timed_out_workers: int = 0
    violations: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, Any]:
        out = {
            k: dict(sorted(v.items())) if isinstance(v, Counter) else v
            for k, v in vars(self).items()
        }
        out["violations"] = len(self.violations)
        return out

    def __str__(self) -> str:
        lines = [f"soak: {json.dumps(self.figures(), sort_keys=True)}"]
        lines += [f"  VIOLATION: {v}" for v in self.violations[:50]]
        return "\n".join(lines)


def audit(
    reports: Sequence[dict[str, Any]],
    items: Iterable[dict[str, Any]],
    *,
    contexts: Mapping[str, Sequence[str]],
    faults: dict[str, int] | None = None,
) -> SoakResult:
    """Check every worker's acknowledgements against the table's raw items (a full Scan) and
    the contexts as the store reads them (``read_contexts``: message ids per session).
    ``faults``: totals of an injector shared by threads (whose reports carry none)."""
    result = SoakResult(workers=len(reports))
    result.faults.update(faults or {})
    bad = result.violations
    meta: dict[str, dict[str, Any]] = {}
    records: dict[str, list[dict[str, Any]]] = defaultdict(list)
    pages: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for raw in items:
        item = {k: _DESER.deserialize(v) for k, v in raw.items()}
        sid = str(item["pk"]).removeprefix("session#")
        sk = str(item["sk"])
        if sk == "metadata":
            meta[sid] = item
        elif sk.startswith("msg#"):
            pages[sid].append(item)
        elif sk.startswith("tool#"):
            records[sid].append(item)
        else:
            bad.append(f"unexpected item {sid}/{sk}")

    events_by_sid: dict[str, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for report in reports:
        result.elapsed_s = max(result.elapsed_s, float(report.get("elapsed_s", 0)))
        result.timed_out_workers += bool(report.get("timed_out"))
        for kind, n in report.get("faults", {}).items():
            result.faults[kind] += int(n)
        for event in report["events"]:
            result.operations += 1
            result.by_operation[event["op"]] += 1
            events_by_sid[event["sid"]].append((report["worker"], event))
            if event["ok"]:
                result.acknowledged += 1
            else:
                result.errors[event["error"]] += 1
            if "untyped" in event:
                result.untyped_exceptions += 1
                bad.append(f"untyped exception from {event['op']}: {event['untyped']}")
            if event.get("ambiguous") and not event["ok"]:
                result.ambiguous_calls += 1
            if event.get("error") == "Unavailable":
                reason = re.sub(r"'[^']*'", "'...'", event.get("message", ""))
                result.unavailable[f"{event['op']}: {reason}"[:160]] += 1
        _check_program_order(report, result)

    for sid in sorted(set(events_by_sid) | set(meta)):
        _audit_session(
            sid,
            meta.get(sid),
            records[sid],
            sorted(pages[sid], key=lambda p: str(p["sk"])),
            contexts.get(sid),
            events_by_sid[sid],
            result,
        )
    return result


def _may_have_landed(event: dict[str, Any]) -> bool:
    """A call that raised but may still have been applied (its response was lost)."""
    return bool(event.get("ambiguous")) or bool(event.get("maybe_applied"))


def _landed_despite_error(event: dict[str, Any], what: str, result: SoakResult) -> None:
    """A failed call whose write is in the table. Honest only as ``Unavailable``
    (``maybe_applied``); any other error tells the caller "not done" about a done write."""
    if not _may_have_landed(event):
        result.phantoms += 1
        result.violations.append(f"{what}: refused ({event['error']}) but applied anyway")
    elif event["error"] != "Unavailable":
        result.applied_but_refused += 1
        result.violations.append(
            f"{what}: applied (its response was lost) but reported as {event['error']}"
        )


def _unacknowledged(
    tries: list[dict[str, Any]], what: str, unsent: str, result: SoakResult
) -> None:
    """A write in the table that no call acknowledged: one of the failed ``tries`` landed."""
    if not tries:
        result.phantoms += 1
        result.violations.append(unsent)
        return
    landed = [e for e in tries if _may_have_landed(e)] or tries
    _landed_despite_error(landed[0], what, result)


def _check_program_order(report: dict[str, Any], result: SoakResult) -> None:
    """A worker's own observations of one session never move backwards (versions, statuses)."""
    bad = result.violations
    last: dict[str, tuple[int, Status]] = {}
    for event in report["events"]:
        status_text = event.get("status") if event["ok"] else event.get("current")
        if status_text is None:
            continue
        status = Status(status_text)
        version = int(event.get("version", event.get("current_version", 0)))
        sid = event["sid"]
        if sid in last:
            v0, s0 = last[sid]
            if status not in reachable(s0):
                result.forbidden += 1
                bad.append(f"{report['worker']} saw {sid} go {s0.value} -> {status.value}")
            if version and version < v0:
                bad.append(f"{report['worker']} saw {sid} version go {v0} -> {version}")
            version = max(version, v0)
        last[sid] = (version, status)


def _audit_session(
    sid: str,
    item: dict[str, Any] | None,
    records: list[dict[str, Any]],
    pages: list[dict[str, Any]],
    read: Sequence[str] | None,
    events: list[tuple[str, dict[str, Any]]],
    result: SoakResult,
) -> None:
    bad = result.violations
    creates = [e for _, e in events if e["op"] == "create_session"]
    acked_creates = [e for e in creates if e["ok"]]
    if item is None:
        if acked_creates:
            result.losses += 1
            bad.append(f"{sid}: creation acknowledged but no session")
        return
    if len(acked_creates) > 1:
        result.duplicates += len(acked_creates) - 1
        bad.append(f"{sid}: creation acknowledged {len(acked_creates)} times")
    if not acked_creates:
        unsent = f"{sid}: exists but nobody tried to create it"
        _unacknowledged(creates, f"{sid}: create", unsent, result)

    _audit_idle(sid, item, events, result)
    final = Status(item["status"])
    version = int(item["version"])
    result.final_status[sid] = final.value
    result.final_version[sid] = version

    # ---- context, as the read API returns it: exactly the acknowledged messages, each once,
    # each batch contiguous, each worker's in its order
    if read is None:
        bad.append(f"{sid}: exists but its context could not be read")
    context = list(read or [])
    in_pages = [str(json.loads(text)["m"]) for page in pages for text in page.get("messages", [])]
    if context != in_pages:
        bad.append(f"{sid}: the context read ({len(context)}) is not the pages' ({len(in_pages)})")
    reserved = int(item.get("messageCount", 0))
    holes = reserved - len(in_pages)
    result.stored_messages += len(context)
    dupes = len(context) - len(set(context))
    if dupes:
        result.duplicates += dupes
        bad.append(f"{sid}: {dupes} duplicated context messages")
    position = {m: i for i, m in enumerate(context)}
    landed_appends = 0
    unstored_max = 0  # appends that raised Unavailable and stored nothing: each may have
    unstored_seqs = 0  # reserved its seqs, a hole
    known: set[str] = set()
    last_by_worker: dict[str, int] = {}
    for worker, e in events:
        if e["op"] != "append_context":
            continue
        msgs: list[str] = e["msgs"]
        known.update(msgs)
        present = [m in position for m in msgs]
        if e["ok"]:
            result.acked_messages += len(msgs)
        if all(present):
            landed_appends += 1
            start = position[msgs[0]]
            if [position[m] for m in msgs] != list(range(start, start + len(msgs))):
                bad.append(f"{sid}: batch {msgs} not contiguous in the context")
            if start < last_by_worker.get(worker, -1):
                bad.append(f"{sid}: {worker}'s batch {msgs} stored before its earlier appends")
            last_by_worker[worker] = start
        elif any(present):
            bad.append(f"{sid}: batch {msgs} partly applied")
        elif not e["ok"] and e["error"] == "Unavailable":
            unstored_max += 1
            unstored_seqs += len(msgs)
        if e["ok"] and not all(present):
            result.losses += present.count(False)
            bad.append(f"{sid}: acknowledged messages {msgs} missing")
        if not e["ok"] and any(present):
            if e.get("maybe_applied") is False:
                result.phantoms += 1
                bad.append(f"{sid}: append {msgs} said maybe_applied=False but was stored")
            else:
                _landed_despite_error(e, f"{sid}: append {msgs}", result)
    if not 0 <= holes <= unstored_seqs:
        bad.append(
            f"{sid}: {reserved} seqs reserved, {len(in_pages)} stored: {holes} in holes, but "
            f"the failed appends could leave at most {unstored_seqs}"
        )
    # What each load showed is a prefix of the context as it ended up.
    for worker, e in events:
        if e["op"] == "load" and e["ok"] and "context_digest" in e:
            shown = int(e["context_len"])
            if shown > len(context) or context_digest(context[:shown]) != e["context_digest"]:
                bad.append(f"{sid}: {worker} loaded {shown} messages, not a prefix of the end")
    strangers = set(context) - known
    if strangers:
        result.phantoms += len(strangers)
        bad.append(f"{sid}: messages nobody sent: {sorted(strangers)[:5]}")

    # ---- tool records: one per id, the union of what was acknowledged, as acknowledged
    result.tool_records += len(records)
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_id[str(record["toolCallId"])].append(record)
        if record["sk"] != f"tool#{record['toolCallId']}" or record.get("state") != "recorded":
            bad.append(f"{sid}: tool call item {record['sk']} is not a recorded tool#<id>")
    for tool_id, same in by_id.items():
        if len(same) > 1:
            result.duplicates += len(same) - 1
            bad.append(f"{sid}: {len(same)} records for tool call {tool_id}")
    acked_ids: set[str] = set()
    failed: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for _, e in events:
        if e["op"] != "record_tool_call":
            continue
        tool_id = e["tool_call_id"]
        stored = _stored_fields(by_id.get(tool_id))
        if e["ok"]:
            acked_ids.add(tool_id)
            if stored is None:
                result.losses += 1
                bad.append(f"{sid}: acknowledged tool call {tool_id} has no record")
            elif e["record"] != stored:
                result.record_mismatches += 1
                bad.append(f"{sid}: {tool_id} acknowledged as {e['record']}, stored {stored}")
            continue
        failed[tool_id].append(e)
        if e["error"] == "ToolCallConflict":
            sent = tool_payload(sid, int(tool_id.rsplit("-", 1)[1]), e.get("variant"))
            if stored is None or all(stored[k] == sent[k] for k in ("input", "output")):
                result.record_mismatches += 1
                bad.append(f"{sid}: ToolCallConflict for {tool_id} with the stored payload")
    for tool_id in sorted(set(by_id) - acked_ids):
        unsent = f"{sid}: record {tool_id} that nobody sent"
        _unacknowledged(failed[tool_id], f"{sid}: tool call {tool_id}", unsent, result)

    # ---- lifecycle: statuses held, reachability, version accounting
    held = {Status.INITIALIZING, final}
    for _, e in events:  # only transition and update_status carry a target ("to")
        statuses = [e.get("status"), e.get("to")] if e["ok"] else [e.get("current")]
        held.update(Status(s) for s in statuses if s is not None)
        if e["ok"] and e["op"] in ("append_context", "record_tool_call"):
            held.add(Status.ACTIVE)
    if reserved or records:
        held.add(Status.ACTIVE)
    if Status.CLOSED in held:
        held.add(Status.CLOSING)
    for status in held:
        if final not in reachable(status):
            result.forbidden += 1
            bad.append(f"{sid}: held {status.value}, but now {final.value}")
    if final is Status.INITIALIZING and (reserved or records):
        result.forbidden += 1
        bad.append(f"{sid}: initializing with context or records (went back from active)")
    changes = len(held) - 1
    # Unknown only if the session may have passed through "active" unseen: an activation whose
    # response was lost.
    slack = int(
        Status.ACTIVE not in held
        and final in (Status.CLOSING, Status.CLOSED)
        and any(
            e.get("to") == Status.ACTIVE.value and not e["ok"] and _may_have_landed(e)
            for _, e in events
        )
    )
    # An append that failed between its reservation and its page bumped the version too.
    slack += unstored_max
    floor = changes + (1 if holes > 0 else 0)
    if not floor <= version - 1 - landed_appends <= changes + slack:
        result.version_mismatches += 1
        bad.append(
            f"{sid}: version {version} != 1 + {landed_appends} appends + {changes} status "
            f"changes (+ up to {unstored_max} reservations without a page; "
            f"held {sorted(s.value for s in held)})"
        )


def _audit_idle(
    sid: str, item: dict[str, Any], events: list[tuple[str, dict[str, Any]]], result: SoakResult
) -> None:
    """No write acknowledged on a session idle past its timeout. Every write that may have
    landed (acknowledged -- a no-op included, which only loosens the bound -- or ambiguous) set
    ``idleUntil`` to its own time + idle at most, and could do so before a write ``w`` only if
    it started before ``w`` ended; ``w``'s condition saw a time no earlier than ``w`` began. So
    an acknowledged ``w`` that began at or after every such deadline was accepted on an expired
    session."""
    if "idle" not in item:  # a hand-made item (the audit's own tests): no idle timeout
        return
    idle = session_from_item(item).idle_seconds
    if idle is None:
        return
    result.idle_sessions += 1
    writes = [e for _, e in events if e["op"] not in ("get_session", "load") and "t0" in e]
    landed = [
        e for e in writes if e["ok"] or _may_have_landed(e) or e.get("error") == "Unavailable"
    ]
    for w in writes:
        if not w["ok"]:
            result.idle_refusals += w.get("error") == "SessionExpired"
            continue
        if w["op"] == "create_session":
            continue  # the first write: nothing to be expired yet
        before = [e for e in landed if e is not w and e["t0"] < w["t1"]]
        deadline = max((min(e["t1"], w["t1"]) // 1000 + idle for e in before), default=None)
        if deadline is None or w["t0"] // 1000 >= deadline:
            result.idle_expired_writes += 1
            result.violations.append(
                f"{sid}: {w['op']} acknowledged at {w['t0']} ms, idle since before {deadline} s"
            )


def _stored_fields(items: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The first stored record of a tool call as ``_record_fields`` shows a record, if any."""
    if not items:
        return None
    item = items[0]
    return {
        "tool_call_id": item["toolCallId"],
        "tool_name": item["toolName"],
        "input": json.loads(item["input"]),
        "output": json.loads(item["output"]),
        "duration_ms": int(item["durationMs"]),
        "recorded_at": item["recordedAt"],
    }


def scan_table(client: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


# ---------------------------------------------------------------------------------- running


def run_threads(
    store: Any,
    plan: SoakPlan,
    threads: int,
    *,
    injector: FaultInjector | None = None,
) -> list[dict[str, Any]]:
    """``threads`` workers sharing ``store`` (and its client); joined with a timeout.
    The shared injector's totals are not in the reports: pass them to ``audit``."""
    reports: list[dict[str, Any]] = []

    def work(n: int) -> None:
        reports.append(run_worker(store, plan, f"t{n}", injector=injector, report_faults=False))

    pool = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=plan.deadline_s + 120)
    return reports


def main(argv: list[str] | None = None) -> int:
    """One worker process: ``python -m tests.support.soak ENDPOINT WORKER PLAN_JSON``."""
    from sessionstore.client import connect
    from sessionstore.store import SessionStore

    parser = argparse.ArgumentParser(prog="python -m tests.support.soak")
    parser.add_argument("endpoint")
    parser.add_argument("worker")
    parser.add_argument("plan", help="SoakPlan as JSON")
    parser.add_argument("--no-wait", action="store_true", help="start without waiting for stdin")
    args = parser.parse_args(argv)
    plan = SoakPlan.from_json(args.plan)
    client = connect(args.endpoint)
    store = SessionStore(client, plan.table)
    injector = None
    if plan.fault_rates:
        seed = random.Random(f"{plan.seed}/{args.worker}").randrange(2**32)
        injector = FaultInjector(client, rates=plan.injector_rates(), seed=seed).attach()
    if not args.no_wait:
        print("ready", flush=True)
        sys.stdin.readline()
    report = run_worker(store, plan, args.worker, injector=injector)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
