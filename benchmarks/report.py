"""The table (Markdown, printed and saved), JSON, CSV, the plot and the benchmarks page's block."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any, NamedTuple

from . import growth as growth_phase
from .growth import Curves, Load, Point, checkpoints, kib
from .overhead import OverheadResult
from .suite import SuiteTiming
from .updates import StatusWalk, Summary

RESULTS = Path(__file__).resolve().parent / "results"
#: Where a run writes what it measured: the book's page (the README links to it).
BENCH_PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"

NAMES = {
    "sessionstore": "sessionstore",
    "source": "source loop",
    "pynamodb": "PynamoDB",
}
ORDER = ["sessionstore", "source", "pynamodb"]


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def markdown(
    meta: dict[str, Any],
    summaries: list[Summary],
    walks: list[StatusWalk],
    overhead: list[OverheadResult],
    curves: Curves | None,
    loads: list[Load],
    suite: list[SuiteTiming],
) -> str:
    out: list[str] = []
    add = out.append
    add(
        f"Benchmarks, {meta['when']} (commit {meta['commit']}, {meta['cpus']} CPUs, "
        f"Python {meta['python']}, boto3 {meta['boto3']}, moto {meta['moto']} serialized, "
        f"PynamoDB {meta['pynamodb']}); `make bench` took {meta['wall_s']:.0f} s."
    )
    add(
        "Timings come from a shared, noisy 2-core machine: contenders run interleaved "
        "(round-robin per repeat, order rotated) against the same embedded engine, so read "
        "the ratios rather than the absolute rates. Request counts are exact (botocore events)."
    )
    add("")

    if summaries:
        out.extend(updates_markdown(meta, summaries, overhead))
    if walks:
        add(
            "**Status changes, uncontended** (initializing -> active -> closing -> closed, "
            "the contender's own status API):"
        )
        add("")
        add("| API | requests / status change | by operation |")
        add("|---|---:|---|")
        for w in walks:
            ops = ", ".join(f"{k} {v}" for k, v in sorted(w.by_operation.items()))
            add(f"| {w.contender} | {w.requests_per_move:.2f} | {ops} |")
        add("")
    if overhead:
        add(
            f"**Library overhead** -- CPU time per call over botocore's Stubber (no network, "
            f"no response parsing), sessionstore vs a raw boto3 client sending the identical "
            f"request; median of {overhead[0].repeats} x {overhead[0].calls} calls; "
            "a monitor, with no target (botocore is most of the CPU of a call, and a real round "
            "trip is milliseconds against these microseconds; what users pay is requests, write "
            "units and latency). The control row measures the "
            "same way with a raw "
            "client on both sides: how far this machine's noise alone moves the ratio of "
            "identical work. *Paired*: the median of each repeat's own ratio (its two sides "
            "run back to back), with a bootstrap 95% interval -- what the ratio is, as far as "
            "this many repeats can tell."
        )
        add("")
        add(
            "| operation | request | raw boto3 us | sessionstore us | ratio [min-max] "
            "| paired [95% interval] |"
        )
        add("|---|---|---:|---:|---:|---:|")
        for r in overhead:
            name = (
                f"control: {r.operation}"
                if r.control and "control" not in r.operation
                else r.operation
            )
            add(
                f"| {name} | {r.request} | {r.raw_us:.0f} | {r.ours_us:.0f} | "
                f"{r.ratio:.2f}x [{r.ratio_min:.2f}-{r.ratio_max:.2f}] | "
                f"{r.paired:.2f}x [{r.paired_low:.2f}-{r.paired_high:.2f}] |"
            )
        add("")
        over = [r for r in overhead if r.profile]
        if over:
            add(
                "Where sessionstore's extra time goes (cProfile, which inflates small "
                "functions; cumulative us per call of the sessionstore-side functions that do "
                "not wrap the botocore call):"
            )
            add("")
            for r in over:
                head, *rest = r.profile
                named = [
                    (
                        line.split("us cum")[1].strip().split(" x")[0].split(" ", 1)[-1],
                        line.split("us cum")[0].strip(),
                    )
                    for line in rest
                ]
                top = "; ".join(
                    [f"{name} {us} us" for name, us in named if not name.startswith("<")][:5]
                )
                add(f"- {r.operation}: {head}. Top: {top}.")
            add("")
    if curves:
        out.extend(growth_markdown(curves))
    if loads:
        sizes = curves.sizes if curves else {}
        add(
            "**Loading a session's tool history** (`load()`: one Query, strongly consistent, "
            "1 MB pages): read units for the metadata item, an empty context and N tool "
            "records of "
            f"{sizes.get('ours_record_bytes')} B (ours, JSON text) / "
            f"{sizes.get('source_record_bytes')} B (source, native maps); the paged context is "
            "in the table above."
        )
        add("")
        add("| tool records | sessionstore RCU (pages) | source RCU (pages) |")
        add("|---:|---:|---:|")
        for ld in loads:
            add(
                f"| {ld.records:,} | {ld.ours_rcu:,.0f} ({ld.ours_pages}) | "
                f"{ld.source_rcu:,.0f} ({ld.source_pages}) |"
            )
        add("")
    if suite:
        add("**Suite timing** (wall time):")
        add("")
        add("| command | seconds | result |")
        add("|---|---:|---|")
        for t in suite:
            result = (
                "timed out"
                if t.returncode is None and t.seconds
                else "ok"
                if t.returncode == 0
                else "skipped"
                if t.returncode is None
                else f"exit {t.returncode}"
            )
            add(f"| `{t.command}` | {t.seconds:.0f} | {result}: {t.summary} |")
        add("")
    return "\n".join(out).rstrip() + "\n"


class Target(NamedTuple):
    """A target and the figures it is judged on (``against``: the contender it compares to)."""

    what: str
    ours: str
    against: str
    ratio: str
    bound: str
    met: bool


WORK_LABELS = {"status": "status change", "update": "attribute change", "append": "append"}
#: The attribute change's targets, against the source loop.
REQUESTS_RATIO_TARGET = 0.55  # 8 writers: sessionstore's requests per commit / the source's
RATE_RATIO_TARGET = 1.5  # 8 writers, +5 ms RTT: sessionstore's commits/s / the source's
APPEND_META_TARGET = 1.2  # 8 writers: requests to the metadata item per committed append


def targets(summaries: list[Summary]) -> list[Target]:
    """The targets this run's figures can be judged on, each with those figures."""
    by = {(s.scenario, s.contender): s for s in summaries}
    out: list[Target] = []
    ours, src = by.get(("8 writers", "sessionstore")), by.get(("8 writers", "source"))
    if ours and src and src.requests_per_commit:
        ratio = ours.requests_per_commit / src.requests_per_commit
        out.append(
            Target(
                "attribute change, 8 writers: requests per commit",
                f"{ours.requests_per_commit:.2f}",
                f"source loop {src.requests_per_commit:.2f}",
                f"{ratio:.2f}x",
                f"<= {REQUESTS_RATIO_TARGET:.2f}x",
                ratio <= REQUESTS_RATIO_TARGET,
            )
        )
    rtt = "8 writers, +5 ms RTT"
    ours, src, pyn = (by.get((rtt, c)) for c in ("sessionstore", "source", "pynamodb"))
    if ours and src and src.per_second_median:
        ratio = ours.per_second_median / src.per_second_median
        out.append(
            Target(
                f"attribute change, {rtt}: commits/s (median)",
                f"{ours.per_second_median:.0f}",
                f"source loop {src.per_second_median:.0f}",
                f"{ratio:.2f}x",
                f">= {RATE_RATIO_TARGET:.1f}x",
                ratio >= RATE_RATIO_TARGET,
            )
        )
    if ours and pyn and pyn.per_second_median:
        ratio = ours.per_second_median / pyn.per_second_median
        out.append(
            Target(
                f"attribute change, {rtt}: commits/s (median)",
                f"{ours.per_second_median:.0f}",
                f"PynamoDB {pyn.per_second_median:.0f}",
                f"{ratio:.2f}x",
                ">= 1x",
                ratio >= 1.0,
            )
        )
    appends = by.get(("append, 8 writers", "sessionstore"))
    if appends and appends.commits:
        ops = appends.by_operation
        meta = ops.get("UpdateItem", 0) / appends.commits
        pages = ops.get("PutItem", 0) / appends.commits
        out.append(
            Target(
                "append, 8 writers: requests to the metadata item per committed append "
                "(no version contention)",
                f"{meta:.2f}, {appends.wasted_per_commit:.2f} wasted (+ {pages:.2f} PutItem of "
                f"its page: {appends.requests_per_commit:.2f} in all, a reservation and a page "
                "by design)",
                "-",
                "-",
                f"<= {APPEND_META_TARGET}",
                meta <= APPEND_META_TARGET,
            )
        )
    if summaries:
        lost = sum(s.lost_updates for s in summaries)
        out.append(Target("lost updates, all runs", str(lost), "-", "-", "0", lost == 0))
    return out


def performance_done_when(
    summaries: list[Summary], overhead: list[OverheadResult]
) -> list[tuple[str, bool]]:
    """The targets, as text and whether each is met (only those this run has figures for)."""
    return [
        (
            f"{t.what}: {t.ours}"
            + (f" vs {t.against} = {t.ratio}" if t.against != "-" else "")
            + f" (target {t.bound})",
            t.met,
        )
        for t in targets(summaries)
    ]


def _work(meta: dict[str, Any], scenario: str) -> str:
    works: dict[str, str] = meta["updates"].get("works", {})
    if scenario in works:
        return works[scenario]
    head = scenario.split(",", 1)[0]
    return head if head in WORK_LABELS else "update"


def _scenario_label(scenario: str, work: str) -> str:
    """The scenario without its work's prefix (the table has a column for the work)."""
    prefix = f"{work}, "
    return scenario[len(prefix) :] if scenario.startswith(prefix) else scenario


def updates_markdown(
    meta: dict[str, Any], summaries: list[Summary], overhead: list[OverheadResult]
) -> list[str]:
    """Phases 1-2: the first table -- status changes, attribute changes, appends; a pointer to
    the tool call's figures; the targets."""
    out: list[str] = []
    add = out.append
    cfg = meta["updates"]
    sessions = cfg.get("status_sessions", 0)
    add(
        f"**Status changes, attribute changes and appends** -- {cfg['repeats']} repeats, "
        "contenders interleaved; every commit bumps the version by one, and after every run the "
        "final version must be the start version plus the commits. A call that gives up is "
        "re-issued by its writer."
    )
    add("")
    add(
        "- *Status change* -- the source design's own operation, `updateSessionStatus`, against "
        f"`update_status`. Each run walks {sessions} fresh sessions (created `initializing` "
        "before the count starts) to `closed`: the lifecycle's three legal moves each, "
        f"{sessions * 3} commits per run; with 8 writers every writer advances each session "
        "in turn until it sees it `closed`, so they race for every move. sessionstore = "
        "`update_status(sid, next)`, `next` the status after the one the writer last saw "
        "(`initializing` for a session it has not seen), each writer its own cold "
        "`SessionStore`: a GetItem the first time it meets a session, then one UpdateItem "
        "pinned to the version of its copy; a refusal is retried on the version its ALL_OLD "
        "carries (no re-read), or ends the call with nothing written when another writer "
        "made that move, and the writer asks for the next one. source = the "
        "`updateSessionStatus` loop transliterated: ConsistentRead GetItem, then UpdateItem "
        "`SET status = :s, updatedAt = :now, version = version + 1` on `version = :v`, re-read "
        "on every conflict; `:s` is the status after "
        "the one its read returned (the source design writes whatever status it is given, so "
        "after a conflict it would repeat another writer's move), and a read showing `closed` "
        "ends the call. PynamoDB = `Model.get` (consistent), set `status` the same way, "
        "`save()` (a PutItem on its `VersionAttribute`), same loop. Every side retries the "
        "same way: the store's default `RetryPolicy`, exponential backoff with full jitter, "
        "U(0, min(500, 10*2^n)) ms after the n-th refusal in a row (from 0), at most 16 "
        "attempts, between a refused write and that writer's next write to the session -- "
        "inside the store's call, in the source loop before its re-read, and before a store "
        "writer asks for the next move when the refusal showed its own already made."
    )
    add(
        f"- *Attribute change* -- {cfg['uncontended_commits']} commits per run with 1 writer, "
        f"{cfg['writers']} writers x {cfg['commits_per_writer']} on one session: sessionstore "
        "= `update_attributes(sid, {'title': ...})`, one TransactWriteItems over the metadata "
        "and attributes items (no version condition: the change commutes) and nothing read "
        "back, each writer its own cold `SessionStore`; source = its `updateSessionStatus` "
        "loop transliterated to write the attribute (GetItem + UpdateItem on the version, the "
        "source design's own 4 attempts and 50*2^n + U(0,20) ms backoff); PynamoDB = get, "
        "set, `save()` with a `VersionAttribute`, same loop."
    )
    add(
        "- *Append* -- same run sizes, one message per commit: sessionstore `append_context` "
        "(an UpdateItem reserving the seq on the metadata item, no version condition, and a "
        "PutItem of its page); source = read + its `appendContextMessages` on the version, "
        "same loop; PynamoDB = get + append + `save()`."
    )
    add(
        f"- '+{cfg['rtt_ms']:.0f} ms RTT': every request delayed by that much in botocore's "
        "before-send, a network round trip the loopback engine does not have. Wall ms / "
        "request = run time / requests (backoff sleeps included); client CPU / commit = CPU of "
        "the writer threads (library + botocore); with 1 writer the rest of the wall time is "
        "mostly the serialized pure-Python engine working on the request."
    )
    add("")
    add(
        "| work | scenario | contender | requests / commit | attempts / commit | "
        "wasted requests / commit | calls gave up | wall ms / request | "
        "client CPU ms / commit | commits/s median [min-max] | vs source | vs PynamoDB |"
    )
    add("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for scenario in cfg["scenarios"]:
        rows = {s.contender: s for s in summaries if s.scenario == scenario}
        work = _work(meta, scenario)
        for name in ORDER:
            s = rows.get(name)
            if s is None:
                continue
            src, pyn = rows.get("source"), rows.get("pynamodb")
            rpc = f"{s.requests_per_commit:.2f}"
            if s.requests_per_commit_max - s.requests_per_commit_min > 0.005:
                rpc += f" [{s.requests_per_commit_min:.2f}-{s.requests_per_commit_max:.2f}]"
            add(
                f"| {WORK_LABELS.get(work, work)} | {_scenario_label(scenario, work)} | "
                f"{NAMES[name]} | {rpc} | {s.attempts_per_commit:.2f} | "
                f"{s.wasted_per_commit:.2f} | {s.gave_up} | {s.ms_per_request:.1f} | "
                f"{s.client_cpu_ms_per_commit:.1f} | "
                f"{s.per_second_median:.0f} [{s.per_second_min:.0f}-{s.per_second_max:.0f}]"
                f" | {_ratio(s.per_second_median, src.per_second_median) if src else '-'} | "
                f"{_ratio(s.per_second_median, pyn.per_second_median) if pyn else '-'} |"
            )
    add("")
    add(
        "Tool call: measured per MCP `tools/call` by `python -m benchmarks.mcp`, which "
        "`make bench` runs after this table and which writes its figures (requests, write "
        "units, latency against a bare server) further down this page; under load by "
        "`python -m benchmarks.mcp_load`."
        + (
            " The library's CPU per `record_tool_call` is in the overhead table below."
            if any(r.operation == "record_tool_call" for r in overhead)
            else ""
        )
    )
    add("")
    lost = sum(s.lost_updates for s in summaries)
    add(
        f"Lost updates over all runs: {lost} (final version == start + commits, checked "
        "after every run). Wasted = requests of attempts that failed their condition "
        "(the failed write, plus the read before it for read-first loops)."
    )
    add("")
    checks = targets(summaries)
    if checks:
        add("Targets (on these figures):")
        add("")
        add("| target | sessionstore | against | ratio | target | result |")
        add("|---|---|---|---:|---:|---|")
        for t in checks:
            add(
                f"| {t.what} | {t.ours} | {t.against} | {t.ratio} | {t.bound} | "
                f"{'met' if t.met else 'missed'} |"
            )
        add("")
    return out


def _requests(counts: dict[str, int]) -> str:
    return " + ".join(f"{v} {k}" for k, v in counts.items()) or "-"


def _or_refused(value: object) -> str:
    return growth_phase.REFUSED if value is None else f"{value:,}"


def growth_markdown(curves: Curves) -> list[str]:
    """Phase 4: inline vs paged at each size, the targets, the inline curve."""
    out: list[str] = []
    add = out.append
    inline, points = curves.inline, curves.paged
    size = growth_phase.MESSAGE_BYTES
    add(
        f"**Cost growth: inline context vs context pages** (computed with `sessionstore.sizing` "
        f"from the items the store writes in the embedded engine; messages of {size} B of JSON "
        "text). A write bills the larger of the item before and after, 1 WCU per started KB "
        "(twice that in a transaction; none here); a Query bills the items of each page it "
        "returns, summed and rounded up to 4 KB (strongly consistent). *Paged* (the package): a "
        "session of N messages built in the engine, then the append of message N alone "
        "(UpdateItem of the metadata item + PutItem of its page, both read back to size them), "
        "the whole context read with `store.context()` (Query requests counted) and checked "
        "message for message, then one transition (active -> closing). *Inline* (the layout "
        "before pages, as in the source design): the same metadata item with the context as a "
        "list inside it; every append and every transition rewrites the whole item, a read is "
        "one GetItem of it."
    )
    add("")
    add(
        "| messages | inline WCU / append | paged WCU / append (metadata + page) | "
        "inline WCU / transition | paged WCU / transition | inline read: RCU (requests) | "
        "paged `context()`: RCU (requests) | paged, one message per page (computed): RCU "
        "(Queries) |"
    )
    add("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for p in points:
        inline_read = (
            growth_phase.REFUSED
            if p.inline_read_rcu is None
            else f"{p.inline_read_rcu:,.0f} ({p.inline_read_requests} GetItem)"
        )
        add(
            f"| {p.messages:,} | {_or_refused(p.inline_append_wcu)} | "
            f"{p.append_wcu} ({p.append_meta_wcu} + {p.append_page_wcu}) | "
            f"{_or_refused(p.inline_transition_wcu)} | {p.transition_wcu} | {inline_read} | "
            f"{p.context_rcu:,.0f} ({_requests(p.context_requests)}) | "
            f"{p.one_per_page_rcu:,.0f} ({p.one_per_page_queries}) |"
        )
    add("")
    top = points[-1]
    add(
        f"- paged, as measured: an append is {_requests(top.append_requests)} "
        f"(metadata item {top.meta_bytes_before:,} -> {top.meta_bytes_after:,} B, page of one "
        f"message {top.page_bytes:,} B); a transition is {_requests(top.transition_requests)} "
        f"(metadata item {top.transition_meta_bytes[0]:,} -> {top.transition_meta_bytes[1]:,} "
        f"B); `load()` of the {top.messages:,}-message session: {top.load_rcu:,.0f} RCU in "
        f"{_requests(top.load_requests)}. Sessions were filled with appends of "
        f"{growth_phase.FILL_BATCH} messages ({top.pages_built:,} pages for {top.messages:,} "
        f"messages, built in {top.build_s:.0f} s), so the measured read holds fewer, larger "
        "pages than a chat appending one message at a time; the last column prices that one "
        "from the measured one-message page (1 MB Query pages; the engine cuts its pages at "
        "1,000,000 B of its own measure)."
    )
    add(
        f"- inline: last accepted append #{inline.max_messages} (item "
        f"{kib(inline.last_item_bytes)}), {inline.wcu_total:,} WCU in total to get there; "
        f"append #{inline.max_messages + 1} would make {kib(inline.refused_at_bytes)} -- "
        f"{inline.limit}. Checked in the engine: "
        + ", ".join(
            f"{n} messages stored as {stored:,} B (formula {formula:,} B)"
            for n, stored, formula in curves.inline_checked
        )
        + "."
    )
    add(
        "- the inline curve, WCU per append: "
        + ", ".join(f"#{n} {w}" for n, w in checkpoints(inline))
        + " (every append in latest.csv and the plot)."
    )
    add("")
    add("Targets (on these figures):")
    add("")
    for what, ok in growth_phase.done_when(curves):
        add(f"- {'met' if ok else 'missed'}: {what}")
    add("")
    return out


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    tmp.replace(path)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    fields = ["phase", "scenario", "contender", "metric", "value", "min", "max", "unit"]
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k, "") for k in fields})


def csv_rows(
    summaries: list[Summary],
    walks: list[StatusWalk],
    overhead: list[OverheadResult],
    curves: Curves | None,
    loads: list[Load],
    suite: list[SuiteTiming],
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for s in summaries:
        base = {"phase": "updates", "scenario": s.scenario, "contender": s.contender}
        rows += [
            {
                **base,
                "metric": "commits_per_second",
                "value": round(s.per_second_median, 2),
                "min": round(s.per_second_min, 2),
                "max": round(s.per_second_max, 2),
                "unit": "commits/s",
            },
            {
                **base,
                "metric": "requests_per_commit",
                "value": round(s.requests_per_commit, 4),
                "min": round(s.requests_per_commit_min, 4),
                "max": round(s.requests_per_commit_max, 4),
                "unit": "requests",
            },
            {
                **base,
                "metric": "attempts_per_commit",
                "value": round(s.attempts_per_commit, 4),
                "unit": "attempts",
            },
            {
                **base,
                "metric": "wasted_requests_per_commit",
                "value": round(s.wasted_per_commit, 4),
                "unit": "requests",
            },
            {**base, "metric": "calls_gave_up", "value": s.gave_up, "unit": "calls"},
            {**base, "metric": "lost_updates", "value": s.lost_updates, "unit": "updates"},
        ]
    for w in walks:
        rows.append(
            {
                "phase": "status_walk",
                "contender": w.contender,
                "metric": "requests_per_status_change",
                "value": round(w.requests_per_move, 4),
                "unit": "requests",
            }
        )
    for r in overhead:
        base = {"phase": "overhead", "scenario": r.operation}
        rows += [
            {
                **base,
                "contender": "raw boto3",
                "metric": "cpu_per_call",
                "value": round(r.raw_us, 1),
                "unit": "us",
            },
            {
                **base,
                "contender": "sessionstore",
                "metric": "cpu_per_call",
                "value": round(r.ours_us, 1),
                "unit": "us",
            },
            {
                **base,
                "contender": "sessionstore",
                "metric": "ratio_vs_raw",
                "value": round(r.ratio, 3),
                "min": round(r.ratio_min, 3),
                "max": round(r.ratio_max, 3),
                "unit": "x",
            },
            {
                **base,
                "contender": "sessionstore",
                "metric": "paired_ratio_vs_raw",
                "value": round(r.paired, 3),
                "min": round(r.paired_low, 3),
                "max": round(r.paired_high, 3),
                "unit": "x",
            },
        ]
    if curves:
        rows += growth_csv_rows(curves)
    for ld in loads:
        rows += [
            {
                "phase": "load",
                "scenario": f"{ld.records} records",
                "contender": "sessionstore",
                "metric": "query_rcu",
                "value": ld.ours_rcu,
                "unit": "RCU",
            },
            {
                "phase": "load",
                "scenario": f"{ld.records} records",
                "contender": "source design",
                "metric": "query_rcu",
                "value": ld.source_rcu,
                "unit": "RCU",
            },
        ]
    for t in suite:
        rows.append(
            {
                "phase": "suite",
                "scenario": t.name,
                "contender": t.command,
                "metric": "wall_seconds",
                "value": round(t.seconds, 1),
                "unit": f"s (exit {t.returncode})",
            }
        )
    return rows


def growth_csv_rows(curves: Curves) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def row(n: int, design: str, metric: str, value: Any, unit: str) -> None:
        rows.append(
            {
                "phase": "growth",
                "scenario": f"{n} messages",
                "contender": design,
                "metric": metric,
                "value": "refused" if value is None else value,
                "unit": unit,
            }
        )

    for p in curves.paged:
        n = p.messages
        row(n, "paged", "wcu_per_append", p.append_wcu, "WCU")
        row(n, "paged", "requests_per_append", sum(p.append_requests.values()), "requests")
        row(n, "paged", "wcu_per_transition", p.transition_wcu, "WCU")
        row(n, "paged", "read_context_rcu", p.context_rcu, "RCU")
        row(n, "paged", "read_context_requests", sum(p.context_requests.values()), "requests")
        row(n, "paged", "load_rcu", p.load_rcu, "RCU")
        row(n, "paged", "read_context_rcu_one_message_per_page", p.one_per_page_rcu, "RCU")
        row(n, "inline", "wcu_per_append", p.inline_append_wcu, "WCU")
        row(n, "inline", "wcu_per_transition", p.inline_transition_wcu, "WCU")
        row(n, "inline", "read_context_rcu", p.inline_read_rcu, "RCU")
        row(n, "inline", "read_context_requests", p.inline_read_requests, "requests")
    for n, size, wcu in curves.inline.series:
        rows.append(
            {
                "phase": "growth_curve",
                "scenario": f"append #{n}",
                "contender": "inline",
                "metric": "wcu_per_append",
                "value": wcu,
                "min": size,
                "unit": "WCU (min = item bytes)",
            }
        )
    return rows


def plot(
    path: Path,
    summaries: list[Summary],
    overhead: list[OverheadResult],
    curves: Curves | None,
    scenarios: list[str],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(20, 10))
    colors = {
        "sessionstore": "#1b7837",
        "source": "#b2182b",
        "pynamodb": "#2166ac",
    }
    order = ORDER
    width = 0.25
    # the attribute change's scenarios are named without their work
    ticks = [
        (sc if sc.split(",", 1)[0] in WORK_LABELS else f"attribute, {sc}").replace(", ", "\n")
        for sc in scenarios
    ]

    ax = axes[0][0]
    for i, name in enumerate(order):
        xs, ys, lo, hi = [], [], [], []
        for j, scenario in enumerate(scenarios):
            s = next((s for s in summaries if s.contender == name and s.scenario == scenario), None)
            if s is None:
                continue
            xs.append(j + (i - 1) * width)
            ys.append(s.per_second_median)
            lo.append(s.per_second_median - s.per_second_min)
            hi.append(s.per_second_max - s.per_second_median)
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, color=colors[name], label=NAMES[name])
    ax.set_xticks(range(len(scenarios)), ticks)
    ax.set_ylabel("commits / s (median, min-max)")
    ax.set_title("Throughput on the embedded engine (interleaved runs)")
    ax.legend()

    ax = axes[0][1]
    for i, name in enumerate(order):
        xs, ys = [], []
        for j, scenario in enumerate(scenarios):
            s = next((s for s in summaries if s.contender == name and s.scenario == scenario), None)
            if s is None:
                continue
            xs.append(j + (i - 1) * width)
            ys.append(s.requests_per_commit)
        ax.bar(xs, ys, width, color=colors[name], label=NAMES[name])
    ax.set_xticks(range(len(scenarios)), ticks)
    ax.set_ylabel("requests per commit")
    ax.set_title("Requests per commit (botocore events)")

    ax = axes[1][0]
    if curves:
        plot_growth(ax, curves)

    ax = axes[1][1]
    if overhead:
        names = [r.operation.replace(" (", "\n(") for r in overhead]
        pos = list(range(len(overhead)))
        ax.bar(
            [x - 0.2 for x in pos],
            [r.raw_us for r in overhead],
            0.4,
            color="#999999",
            label="raw boto3, same request",
        )
        ax.bar(
            [x + 0.2 for x in pos],
            [r.ours_us for r in overhead],
            0.4,
            color=colors["sessionstore"],
            label="sessionstore",
        )
        for x, r in zip(pos, overhead, strict=True):
            ax.text(x + 0.2, r.ours_us, f"{r.ratio:.2f}x", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(pos, names, fontsize=8)
        ax.set_ylabel("CPU us per call (Stubber, median)")
        ax.set_title("Library overhead over raw boto3 (a monitor)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_growth(ax: Any, curves: Curves) -> None:
    """WCU per append against messages in the context, both designs (log-log)."""
    inline = curves.inline
    ax.plot(
        [n for n, _s, _w in inline.series],
        [w for _n, _s, w in inline.series],
        color="#b2182b",
        label=f"inline (computed; refused after #{inline.max_messages})",
    )
    ax.scatter([inline.max_messages + 1], [inline.wcu_last], marker="x", color="#b2182b", zorder=3)
    ax.annotate(
        "400 KB item limit",
        (inline.max_messages + 1, inline.wcu_last),
        textcoords="offset points",
        xytext=(6, -12),
        fontsize=8,
        color="#b2182b",
    )
    points: list[Point] = curves.paged
    ax.plot(
        [p.messages for p in points],
        [p.append_wcu for p in points],
        color="#1b7837",
        marker="o",
        label="paged (measured in the engine)",
    )
    for p in points:
        ax.annotate(
            str(p.append_wcu),
            (p.messages, p.append_wcu),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=8,
        )
    ax.axhline(
        growth_phase.APPEND_TARGET_WCU,
        color="#999999",
        linestyle=":",
        linewidth=1,
        label=f"target <= {growth_phase.APPEND_TARGET_WCU} WCU",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"messages in the context ({growth_phase.MESSAGE_BYTES} B each)")
    ax.set_ylabel("WCU per append")
    ax.set_title("Cost of one append as the context grows")
    ax.legend(fontsize=8)


def update_readme(table: str, page: Path = BENCH_PAGE) -> bool:
    """Replace the ``bench`` block of the benchmarks page, if it has both markers (in order)."""
    return update_block("bench", table, page)


def update_block(name: str, text: str, page: Path = BENCH_PAGE) -> bool:
    """Replace the block ``<!-- name -->`` .. ``<!-- /name -->`` of ``page`` (docs/benchmarks.md)
    with ``text``: the figures a benchmark measured, written by the run itself instead of
    typed. False, and nothing written, if the page lacks the markers."""
    if not page.exists():
        return False
    begin, end = f"<!-- {name} -->", f"<!-- /{name} -->"
    old = page.read_text()
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(old):
        return False
    new = pattern.sub(lambda _m: f"{begin}\n{text.rstrip()}\n{end}", old, count=1)
    if new != old:
        page.write_text(new)
    return True
