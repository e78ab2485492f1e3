"""The table (Markdown, printed and saved), JSON, CSV, the plot and the README block."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from .growth import Growth, Load, checkpoints, kib
from .overhead import TARGET, OverheadResult
from .suite import SuiteTiming
from .updates import StatusWalk, Summary

RESULTS = Path(__file__).resolve().parent / "results"
README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- bench -->", "<!-- /bench -->"

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
    growth: tuple[Growth, Growth] | None,
    loads: list[Load],
    sizes: dict[str, int],
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
        cfg = meta["updates"]
        add(
            f"**Versioned updates of one attribute, and appends** -- {cfg['repeats']} repeats; "
            f"each run commits {cfg['uncontended_commits']} writes with 1 writer, or "
            f"{cfg['writers']} writers x {cfg['commits_per_writer']} on one session, every "
            "commit bumping the version by one. Attribute update: sessionstore = "
            "`update_attributes(sid, {'title': ...})` (one UpdateItem, no version condition: "
            "the change commutes), each writer its own cold `SessionStore`; source = its "
            "`updateSessionStatus` loop transliterated to write the attribute (GetItem + "
            "UpdateItem on the version, 4 attempts, 50*2^n + U(0,20) ms); PynamoDB = get, set, "
            "`save()` with a `VersionAttribute`, same loop. 'append' rows: every contender "
            "appends one message (sessionstore `append_context`; source = read + its "
            "`appendContextMessages` on the version; PynamoDB = get + append + `save()`). "
            "A call that gives up is re-issued until the writer has its commits. "
            f"'+{cfg['rtt_ms']:.0f} ms RTT': every request delayed by that much in botocore's "
            "before-send, a network round trip the loopback engine does not have. Wall ms / "
            "request = run time / requests (backoff sleeps included); client CPU / commit = "
            "CPU of the writer threads (library + botocore); with 1 writer the rest of the "
            "wall time is mostly the serialized pure-Python engine working on the request."
        )
        add("")
        add(
            "| scenario | contender | requests / commit | attempts / commit | "
            "wasted requests / commit | calls gave up | wall ms / request | "
            "client CPU ms / commit | commits/s median [min-max] | vs source | vs PynamoDB |"
        )
        add("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for scenario in meta["updates"]["scenarios"]:
            rows = {s.contender: s for s in summaries if s.scenario == scenario}
            for name in ORDER:
                s = rows.get(name)
                if s is None:
                    continue
                src, pyn = rows.get("source"), rows.get("pynamodb")
                rpc = f"{s.requests_per_commit:.2f}"
                if s.requests_per_commit_max - s.requests_per_commit_min > 0.005:
                    rpc += f" [{s.requests_per_commit_min:.2f}-{s.requests_per_commit_max:.2f}]"
                add(
                    f"| {scenario} | {NAMES[name]} | {rpc} | {s.attempts_per_commit:.2f} | "
                    f"{s.wasted_per_commit:.2f} | {s.gave_up} | {s.ms_per_request:.1f} | "
                    f"{s.client_cpu_ms_per_commit:.1f} | "
                    f"{s.per_second_median:.0f} [{s.per_second_min:.0f}-{s.per_second_max:.0f}]"
                    f" | {_ratio(s.per_second_median, src.per_second_median) if src else '-'} | "
                    f"{_ratio(s.per_second_median, pyn.per_second_median) if pyn else '-'} |"
                )
        lost = sum(s.lost_updates for s in summaries)
        add("")
        add(
            f"Lost updates over all runs: {lost} (final version == start + commits, checked "
            "after every run). Wasted = requests of attempts that failed their condition "
            "(the failed write, plus the read before it for read-first loops)."
        )
        add("")
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
            f"target <= {TARGET:.2f}x."
        )
        add("")
        add("| operation | request | raw boto3 us | sessionstore us | ratio [min-max] | target |")
        add("|---|---|---:|---:|---:|---|")
        for r in overhead:
            ok = "ok" if r.ratio <= TARGET else "**over**"
            add(
                f"| {r.operation} | {r.request} | {r.raw_us:.0f} | {r.ours_us:.0f} | "
                f"{r.ratio:.2f}x [{r.ratio_min:.2f}-{r.ratio_max:.2f}] | {ok} |"
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
    if growth:
        ours, source = growth
        add(
            f"**Cost growth** (computed with `sessionstore.sizing`): write units per append of "
            f"one ~{ours.message_bytes} B message as the context grows (UpdateItem bills the "
            "larger of the item before and after, 1 WCU per started KB)."
        )
        add("")
        add("| messages in context | sessionstore WCU / append | source WCU / append |")
        add("|---:|---:|---:|")
        points = sorted({n for n, _ in checkpoints(ours)} | {n for n, _ in checkpoints(source)})
        for n in points:
            a, b = ours.wcu_at(n), source.wcu_at(n)
            add(
                f"| {n} | {a if a is not None else 'refused'} | "
                f"{b if b is not None else 'refused'} |"
            )
        add("")
        for g in (ours, source):
            add(
                f"- {g.design}: last accepted append #{g.max_messages} (item "
                f"{kib(g.last_item_bytes)}), {g.wcu_total:,} WCU in total to get there; "
                f"refuses at {kib(g.refused_at_bytes)} -- {g.limit}."
            )
        add("")
    if loads:
        add(
            f"**Loading a session** (one Query, strongly consistent, 1 MB pages): read units "
            f"for the metadata item (empty context) and N tool records of "
            f"{sizes.get('ours_record_bytes')} B (ours, JSON text) / "
            f"{sizes.get('source_record_bytes')} B (source, native maps)."
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
    growth: tuple[Growth, Growth] | None,
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
        ]
    if growth:
        for g in growth:
            for n, size, wcu in g.series:
                rows.append(
                    {
                        "phase": "growth",
                        "scenario": f"append #{n}",
                        "contender": g.design,
                        "metric": "wcu_per_append",
                        "value": wcu,
                        "min": size,
                        "unit": "WCU (min = item bytes)",
                    }
                )
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


def plot(
    path: Path,
    summaries: list[Summary],
    overhead: list[OverheadResult],
    growth: tuple[Growth, Growth] | None,
    scenarios: list[str],
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(14, 10))
    colors = {
        "sessionstore": "#1b7837",
        "source": "#b2182b",
        "pynamodb": "#2166ac",
    }
    order = ORDER
    width = 0.25

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
    ax.set_xticks(range(len(scenarios)), [sc.replace(", ", "\n") for sc in scenarios])
    ax.set_ylabel("committed updates / s (median, min-max)")
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
    ax.set_xticks(range(len(scenarios)), [sc.replace(", ", "\n") for sc in scenarios])
    ax.set_ylabel("requests per committed update")
    ax.set_title("Requests per commit (botocore events)")

    ax = axes[1][0]
    if growth:
        for g, color in zip(growth, (colors["sessionstore"], colors["source"]), strict=True):
            ax.plot(
                [n for n, _s, _w in g.series],
                [w for _n, _s, w in g.series],
                color=color,
                label=f"{g.design} (refuses after {g.max_messages})",
            )
            ax.axvline(g.max_messages, color=color, linestyle=":", linewidth=1)
        ax.set_xlabel(f"messages in context (~{growth[0].message_bytes} B each)")
        ax.set_ylabel("WCU per append")
        ax.set_title("Cost of one append as the context grows")
        ax.legend()

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
        ax.set_title(f"Library overhead (target <= {TARGET:.2f}x)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def update_readme(table: str, readme: Path = README) -> bool:
    """Replace the block between the markers, if the README has both (in order)."""
    if not readme.exists():
        return False
    text = readme.read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        return False
    new = pattern.sub(lambda _m: f"{BEGIN}\n{table.rstrip()}\n{END}", text, count=1)
    if new != text:
        readme.write_text(new)
    return True
