"""``python -m benchmarks`` -- every phase, bounded in count and time (10 minutes in all).

python -m benchmarks               # all phases; the suite timing if the budget allows
python -m benchmarks --no-suite    # skip phase 5 (the slow one)
python -m benchmarks --suite       # require phase 5 (still bounded by the budget)
python -m benchmarks --quick       # a smoke run: fewer repeats and calls
python -m benchmarks --only growth --no-suite   # a subset of phases 1-4 (while developing);
                                   # names: updates (1-2), overhead (3), growth (4)
python -m benchmarks --only growth --sizes 10,100,1000   # phase 4 at fewer context sizes
python -m benchmarks --only updates --work status --no-suite   # phases 1-2, status changes only
python -m benchmarks --only overhead --no-suite --overhead-repeats 41 --budget 900
                                   # phase 3 with a paired interval narrow enough to read

Phase 4 builds a session of 10,000 messages in the engine (about a minute). A full run writes
its table into the bench block of docs/benchmarks.md; a run of a subset, or with --quick,
--sizes or --no-docs, leaves that page alone.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from sessionstore.local import LocalDynamoDB

from . import engine_cost, growth, overhead, report, suite, updates
from .contenders import (
    WORKS,
    PynamoDBContender,
    SessionStoreContender,
    SourceContender,
    all_contenders,
)

START = time.monotonic()
ROOT = Path(__file__).resolve().parent.parent
PHASES = ("updates", "overhead", "growth")


def progress(message: str) -> None:
    print(f"[bench {time.monotonic() - START:6.1f}s] {message}", file=sys.stderr, flush=True)


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=Path(__file__).parent,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    suite_flag = parser.add_mutually_exclusive_group()
    suite_flag.add_argument(
        "--suite",
        dest="suite",
        action="store_true",
        default=None,
        help="time the notebook suite and make test (default: if time allows)",
    )
    suite_flag.add_argument("--no-suite", dest="suite", action="store_false")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 repeats, few calls")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (>= 5)")
    parser.add_argument(
        "--overhead-repeats",
        type=int,
        default=7,
        help="phase 3: repeats per side (default 7; 41 gives a paired interval about +-0.05 "
        "wide on a noisy machine -- raise --budget too, phase 3 then takes about 5 minutes)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=570.0,
        help="seconds for the whole run (default 570: under 10 minutes)",
    )
    parser.add_argument(
        "--no-docs",
        action="store_true",
        help="do not write the bench block of docs/benchmarks.md",
    )
    # --no-readme: the same flag under another name, still accepted.
    parser.add_argument("--no-readme", dest="no_docs", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--only",
        action="append",
        choices=PHASES,
        help="run only this phase of 1-4 (repeatable); phase 5 follows --suite/--no-suite",
    )
    parser.add_argument(
        "--work",
        action="append",
        choices=WORKS,
        help="phases 1-2: run only this work's scenarios (repeatable)",
    )
    parser.add_argument(
        "--sizes",
        type=lambda text: tuple(int(x) for x in text.split(",")),
        default=growth.SIZES,
        help="phase 4: context sizes, comma-separated (default 10,100,1000,10000)",
    )
    parser.add_argument("--out", type=Path, default=report.RESULTS)
    args = parser.parse_args(argv)
    only = set(args.only or PHASES)

    deadline = START + args.budget
    repeats = 2 if args.quick else max(5, min(args.repeats, 25))
    overhead_repeats = 3 if args.quick else max(3, min(args.overhead_repeats, 101))
    calls = 100 if args.quick else 400
    uncontended = updates.Scenario("1 writer", 1, 64)
    contended = updates.Scenario("8 writers", 8, 8)
    rtt = 0.005
    # the status work: 21 sessions walked initializing -> closed, 63 commits per run
    walked = 21

    def status(writers: int, latency: float = 0.0) -> updates.Scenario:
        name = f"status, {writers} writer{'s' if writers > 1 else ''}"
        name += f", +{latency * 1000:.0f} ms RTT" if latency else ""
        return updates.Scenario(name, writers, 0, latency, work="status", sessions=walked)

    scenarios = [
        status(1),
        status(8),
        status(1, rtt),
        status(8, rtt),
        uncontended,
        contended,
        updates.Scenario("1 writer, +5 ms RTT", 1, 64, rtt),
        updates.Scenario("8 writers, +5 ms RTT", 8, 8, rtt),
        updates.Scenario("append, 1 writer", 1, 64, work="append"),
        updates.Scenario("append, 8 writers", 8, 8, work="append"),
    ]
    scenarios = [s for s in scenarios if s.work in set(args.work or WORKS)]
    args.out.mkdir(parents=True, exist_ok=True)

    walks: list[updates.StatusWalk] = []
    runs: list[updates.Run] = []
    summaries: list[updates.Summary] = []
    over: list[overhead.OverheadResult] = []
    curves: growth.Curves | None = None
    cost: engine_cost.EngineCost | None = None
    loads: list[growth.Load] = []
    with LocalDynamoDB() as engine:
        endpoint = engine.endpoint_url
        contenders = all_contenders(endpoint)
        if "updates" in only:
            progress(
                f"embedded engine; phases 1-2: versioned updates, {repeats} interleaved repeats "
                f"(noisy shared machine: compare ratios)"
            )
            ours, source, pynamo = contenders[:3]
            assert isinstance(ours, SessionStoreContender)
            assert isinstance(source, SourceContender)
            assert isinstance(pynamo, PynamoDBContender)
            walks = updates.status_walks(ours, source, pynamo)
            progress(
                "  status walk: "
                + ", ".join(f"{w.contender} {w.requests_per_move:.2f}" for w in walks)
            )
            runs = updates.run_all(
                contenders,
                scenarios,
                repeats,
                run_deadline_s=60,
                phase_deadline=min(deadline - 260, time.monotonic() + 240),
                progress=progress,
            )
            summaries = updates.summarize(runs)
            for what, ok in report.performance_done_when(summaries, []):
                progress(f"  target {'met' if ok else 'missed'}: {what}")
            cost = engine_cost.run(endpoint, rounds=20 if args.quick else 60)
            progress(
                "  engine cost per request, x source-style UpdateItem: "
                + ", ".join(f"{k} {cost.ratio(k):.2f}x" for k in engine_cost.KINDS[1:])
            )

        if "overhead" in only:
            progress(
                f"phase 3: library overhead over Stubber ({calls} calls x {overhead_repeats} "
                "repeats per side, alternating)"
            )
            over = overhead.run(
                endpoint,
                calls=calls,
                repeats=overhead_repeats,
                # about 120 s at the default 7 repeats, in proportion beyond that
                deadline=min(deadline - 180, time.monotonic() + 120 * max(1, overhead_repeats / 7)),
                progress=progress,
            )

        if "growth" in only:
            progress(
                "phase 4: cost growth, inline vs paged, at "
                + ", ".join(f"{n:,}" for n in args.sizes)
                + f" messages of {growth.MESSAGE_BYTES} B (sizing rules on the engine's items)"
            )
            curves, loads = growth.run(
                endpoint,
                sizes=args.sizes,
                deadline=min(deadline - 60, time.monotonic() + 150),
                progress=progress,
            )
            for what, ok in growth.done_when(curves):
                progress(f"  target {'met' if ok else 'missed'}: {what}")

    suite_timings: list[suite.SuiteTiming] = []
    remaining = deadline - time.monotonic() - 15
    if args.suite is False:
        progress("phase 5: suite timing skipped (--no-suite)")
    elif remaining < 60:
        progress(f"phase 5: suite timing skipped: only {remaining:.0f} s of budget left")
        suite_timings.append(
            suite.SuiteTiming("suite", "make test", 0.0, None, "skipped: budget spent")
        )
    else:
        progress(f"phase 5: suite timing (notebooks, make test), at most {remaining:.0f} s")
        suite_timings = suite.run(budget_s=remaining)
        for t in suite_timings:
            progress(f"  {t.name}: {t.seconds:.0f} s, exit {t.returncode}: {t.summary}")

    wall = time.monotonic() - START
    meta: dict[str, Any] = {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _commit(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "boto3": version("boto3"),
        "moto": version("moto"),
        "pynamodb": version("pynamodb"),
        "wall_s": wall,
        "quick": args.quick,
        "updates": {
            "repeats": repeats,
            "scenarios": [s.name for s in scenarios],
            "works": {s.name: s.work for s in scenarios},
            "status_sessions": walked,
            "uncontended_commits": uncontended.commits_per_writer,
            "rtt_ms": rtt * 1000,
            "writers": contended.writers,
            "commits_per_writer": contended.commits_per_writer,
            "contenders": {c.name: c.label for c in contenders},
        },
    }
    meta["phases"] = sorted(only, key=PHASES.index)
    table = report.markdown(meta, summaries, walks, over, curves, loads, suite_timings)
    if cost is not None:
        table += "\n" + engine_cost.markdown(cost)
    print(table)

    report.write_json(
        args.out / "latest.json",
        {
            "meta": meta,
            "updates": {
                "summaries": updates.as_dicts(summaries),
                "runs": [
                    {**asdict(r), "per_second": r.per_second, "wasted": r.wasted} for r in runs
                ],
                "status_walks": updates.as_dicts(walks),
                "targets": [t._asdict() for t in report.targets(summaries)],
            },
            "overhead": [asdict(r) for r in over],
            "growth": None
            if curves is None
            else {
                "paged": [asdict(p) for p in curves.paged],
                "inline": asdict(curves.inline),
                "inline_checked_in_engine": curves.inline_checked,
                "done_when": growth.done_when(curves),
                "loads": [asdict(ld) for ld in loads],
                "sizes": curves.sizes,
            },
            "suite": [asdict(t) for t in suite_timings],
            "engine_cost": None if cost is None else asdict(cost),
        },
    )
    report.write_csv(
        args.out / "latest.csv",
        report.csv_rows(summaries, walks, over, curves, loads, suite_timings),
    )
    (args.out / "latest.md").write_text(table)
    report.plot(
        args.out / "latest.png",
        summaries,
        over,
        curves,
        [s.name for s in scenarios],
    )
    _history(args.out / "history.csv", meta, summaries, over, curves, suite_timings)
    wrote = [f"{args.out}/latest.{{json,csv,md,png}}", "history.csv"]
    full = only == set(PHASES) and args.sizes == growth.SIZES and not args.work
    if not args.no_docs and not args.quick and full and report.update_readme(table):
        wrote.append(f"{report.BENCH_PAGE.relative_to(ROOT)} (bench block)")
    progress(f"done in {time.monotonic() - START:.0f} s; wrote " + ", ".join(wrote))
    return 0


def _history(
    path: Path,
    meta: dict[str, Any],
    summaries: list[updates.Summary],
    over: list[overhead.OverheadResult],
    curves: growth.Curves | None,
    timings: list[suite.SuiteTiming],
) -> None:
    """One line per run, so regressions show across commits."""
    row: dict[str, Any] = {
        "when": meta["when"],
        "commit": meta["commit"],
        "quick": meta["quick"],
        "bench_s": round(meta["wall_s"]),
    }
    for s in summaries:
        key = f"{s.contender}/{s.scenario}".replace(" ", "_")
        row[f"{key}/per_s"] = round(s.per_second_median, 1)
        row[f"{key}/req_per_commit"] = round(s.requests_per_commit, 3)
    for r in over:
        row[f"overhead/{r.operation}".replace(" ", "_")] = round(r.ratio, 3)
    for p in curves.paged if curves else []:
        row[f"growth/paged/{p.messages}/wcu_per_append"] = p.append_wcu
        row[f"growth/paged/{p.messages}/wcu_per_transition"] = p.transition_wcu
        row[f"growth/paged/{p.messages}/read_rcu"] = p.context_rcu
    for t in timings:
        row[f"suite/{t.name.split(' (')[0]}".replace(" ", "_")] = round(t.seconds, 1)
    fields = list(row)
    existing: list[dict[str, Any]] = []
    if path.exists():
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            existing = list(reader)
            fields = list(dict.fromkeys([*(reader.fieldnames or []), *fields]))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, restval="")
        writer.writeheader()
        for old in existing[-199:]:
            writer.writerow(old)
        writer.writerow(row)


if __name__ == "__main__":
    sys.exit(main())
