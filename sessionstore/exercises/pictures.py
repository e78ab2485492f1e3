"""The core notebooks' pictures, drawn from what a cell really sent.

Layer: beside the exercises, for the tutorial only; nothing of the store depends on it. Why a
module: a notebook's path shows one call per picture (its source hidden in the book), the
drawing code is tested like code, and a learner who changes a parameter and runs the cell again
gets the picture of *that* run. Each function returns a ``matplotlib.figure.Figure`` made
without pyplot, so a cell that ends with the call shows it once, and nothing depends on a GUI.

The pictures of notebooks 02 and 04 are drawn from a ``timeline.Timeline``: the requests a cell
sent, each attempt with its parameters and what came back. Nothing is random: the same run draws
the same picture.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from .. import schema
from ..conditions import readable
from ..models import Status
from .timeline import Attempt, Outcome, Timeline


class Picture(Figure):
    """A Figure that a notebook shows as a PNG whether or not pyplot was ever imported."""

    def _repr_png_(self) -> bytes:
        png = io.BytesIO()
        self.savefig(png, format="png", dpi=100, metadata={"Software": None})
        return png.getvalue()


__all__ = [
    "Picture",
    "Timeline",
    "item_collection",
    "lost_response",
    "lost_update",
    "state_machine",
    "thread_race",
]


# ------------------------------------------------------------------- sequence diagrams

_COLOURS = {
    Outcome.OK: "tab:green",
    Outcome.REFUSED: "tab:orange",
    Outcome.LOST: "tab:red",
    Outcome.ERROR: "tab:red",
    Outcome.PENDING: "0.5",
}

#: (the label at the sender, the note on the item's lane, and whether the note is bad news)
Describe = Callable[[Attempt, "dict[str, Any]"], tuple[str, str, bool]]


def _sequence(ax: Axes, attempts: Sequence[Attempt], describe: Describe, title: str) -> None:
    """Lanes for the senders above one lane for the item; one column per attempt."""
    ordered = sorted(attempts, key=lambda a: a.order)
    lanes = list(dict.fromkeys(a.actor for a in ordered))
    top = len(lanes)
    state: dict[str, Any] = {}
    for y, lane in enumerate(lanes):
        ax.axhline(top - y, color="0.85", lw=1, zorder=0)
        ax.text(-0.55, top - y, lane, ha="right", va="center", fontsize=9, weight="bold")
    ax.axhline(0, color="0.6", lw=2, zorder=0)
    ax.text(-0.6, 0, "the item", ha="right", va="center", fontsize=9, weight="bold")
    for x, attempt in enumerate(ordered):
        y = top - lanes.index(attempt.actor)
        colour = _COLOURS[attempt.outcome]
        label, note, bad = describe(attempt, state)
        ax.annotate(
            "",
            (x - 0.12, 0.12),
            (x - 0.12, y - 0.12),
            arrowprops={"arrowstyle": "-|>", "color": "0.35", "lw": 1.2},
        )
        if attempt.outcome is Outcome.LOST:  # the answer never arrives
            ax.plot([x + 0.12, x + 0.12], [0.12, y / 2], color=colour, lw=1.5, ls="--")
            ax.plot(x + 0.12, y / 2, marker="X", color=colour, markersize=10)
        else:
            ax.annotate(
                "",
                (x + 0.12, y - 0.12),
                (x + 0.12, 0.12),
                arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 1.5},
            )
        ax.text(
            x,
            y + 0.14,
            label,
            ha="center",
            va="bottom",
            fontsize=7.5,
            color="0.1",
            bbox={"boxstyle": "round,pad=0.25", "fc": "white", "ec": colour},
        )
        if note:
            ax.text(
                x,
                -0.16,
                note,
                ha="center",
                va="top",
                fontsize=7.5,
                color="tab:red" if bad else "0.15",
                weight="bold" if bad else "normal",
            )
    ax.set_xlim(-1.6, len(ordered) - 0.4)
    ax.set_ylim(-1.0, top + 1.0)
    ax.axis("off")
    ax.set_title(title, fontsize=10, loc="left")


def _writers(item: Mapping[str, Any]) -> list[str]:
    """Who wrote each message of a ``context`` list (the text before its colon)."""
    return [m["S"].split(":")[0] for m in item.get("context", {}).get("L", [])]


def _describe_02(attempt: Attempt, state: dict[str, Any]) -> tuple[str, str, bool]:
    """Notebook 02: reads show the version read; writes the condition they carried; the
    item's lane the version and whose messages it holds after each write."""
    if attempt.operation == "GetItem":
        item = attempt.response.get("Item", {})
        state.update(version=int(item["version"]["N"]), context=_writers(item))
        return f"GetItem\nreads version {state['version']}", "", False
    condition = readable(attempt.params, "ConditionExpression")
    condition = f"if {condition}" if condition else "no condition"
    if attempt.outcome is Outcome.OK:
        values = attempt.params.get("ExpressionAttributeValues", {}).values()
        written = next((_writers({"context": v}) for v in values if "L" in v), [])
        lost = [w for w in state.get("context", []) if w not in written]
        state.update(version=state.get("version", 0) + 1, context=written)
        note = f"version {state['version']}\n[{', '.join(written)}]"
        if lost:
            note += f"\n{', '.join(lost)}'s message lost"
        return f"UpdateItem\n{condition}\n-> written", note, bool(lost)
    old = attempt.old_item() or {}
    if "version" in old:
        state.update(version=int(old["version"]["N"]), context=_writers(old))
    seen = f"\nALL_OLD: version {state.get('version')}" if old else ""
    return f"UpdateItem\n{condition}\n-> {attempt.outcome.value}{seen}", "unchanged", False


def lost_update(unguarded: Timeline, guarded: Timeline) -> Picture:
    """Notebook 02: Alice's and Bob's requests, as sent, without the version clause and with
    it; under each, the item after every write."""
    fig = Picture(figsize=(9.5, 6.4), layout="constrained")
    top, bottom = fig.subplots(2, 1)
    _sequence(
        top,
        unguarded.attempts,
        _describe_02,
        "Read, modify, write back with no condition: both writes land",
    )
    _sequence(
        bottom,
        guarded.attempts,
        _describe_02,
        "With `version = <the version read>`: Bob is refused, retries on ALL_OLD",
    )
    return fig


def _describe_04(attempt: Attempt, state: dict[str, Any]) -> tuple[str, str, bool]:
    """Notebook 04: each attempt of each delivery; the item's lane says what the sender
    knows of the call's item after it. An attempt after a lost one, from the same sender,
    is botocore's retry."""
    retry = state.pop("lost_by", None) == attempt.actor
    name = "botocore's retry" if retry else attempt.operation
    if attempt.operation == "GetItem":
        return "GetItem\n(the session's ttl)", "", False
    if attempt.outcome is Outcome.LOST:
        state["lost_by"] = attempt.actor
        return f"{name}\napplied; response lost", "the sender\ncannot tell", True
    old = attempt.old_item()
    if attempt.outcome is Outcome.REFUSED and old is not None:
        when = old.get("recordedAt", {}).get("S", "?")[11:19]
        return f"{name}\n-> refused: id taken", f"one item,\nrecorded {when}\n(in ALL_OLD)", False
    return f"{name}\n-> {attempt.outcome.value}", "", False


def lost_response(timeline: Timeline) -> Picture:
    """Notebook 04: the deliveries of one tool call -- a lost response and botocore's retry,
    the client's repeat, another instance's replay -- and the one item they all find."""
    width = max(7.0, 1.7 * len(timeline.attempts) + 2.5)
    fig = Picture(figsize=(width, 1.3 * len(timeline.actors()) + 2.2), layout="constrained")
    _sequence(
        fig.subplots(),
        timeline.attempts,
        _describe_04,
        f"{len(timeline.attempts)} attempts, one tool call, one item",
    )
    return fig


# ------------------------------------------------------------------- notebook 01


def item_collection(
    items: Sequence[Mapping[str, Any]],
    kind: Callable[[str], str],
    holds: Callable[[Mapping[str, Any]], str],
) -> Picture:
    """Notebook 01: one session's items as one Query returned them, coloured by how often each
    is written, with the key ranges of the store's two reads."""
    colour = {
        "metadata": "#f4b183",
        "attributes": "#ffd966",
        "context page": "#a9d18e",
        "tool call": "#9dc3e6",
    }
    n = len(items)
    fig = Picture(figsize=(10, 4.2), layout="constrained")
    ax = fig.subplots()
    for y, item in enumerate(items):
        top = n - 1 - y  # the first key at the top
        ax.add_patch(
            Rectangle(
                (0, top + 0.08), 7.0, 0.84, facecolor=colour[kind(item["sk"])], edgecolor="0.3"
            )
        )
        ax.text(0.12, top + 0.5, item["sk"], family="monospace", fontsize=9, va="center")
        ax.text(2.25, top + 0.5, holds(item), fontsize=8.5, va="center")
        ax.text(
            6.9, top + 0.5, f"ttl {item['ttl']}", fontsize=7.5, va="center", ha="right", color="0.3"
        )
    ax.add_patch(Rectangle((-1.75, 0.08), 1.6, n - 0.16, facecolor="0.93", edgecolor="0.3"))
    ax.text(
        -0.95,
        n / 2,
        f"pk =\n{items[0]['pk']}\n\none partition,\nsorted by sk",
        ha="center",
        va="center",
        fontsize=8.5,
        family="monospace",
    )
    for label, high, x in [
        ("load()", schema.TOOLS_END, 7.35),
        ("context()", schema.PAGES_END, 8.55),
    ]:
        inside = [y for y, item in enumerate(items) if schema.META_SK <= item["sk"] <= high]
        ax.plot([x, x], [n - 1 - inside[-1] + 0.12, n - inside[0] - 0.12], lw=4, color="0.35")
        ax.text(
            x + 0.12, n - inside[0] - 0.3, f"{label}:\nmetadata\n… {high}", fontsize=8, va="top"
        )
    legend = [
        ("metadata", "metadata: every write"),
        ("attributes", "attributes: every change of them"),
        ("context page", "context page: written once"),
        ("tool call", "tool call: written once"),
    ]
    ax.legend(
        handles=[Patch(facecolor=colour[k], edgecolor="0.3", label=text) for k, text in legend],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.02),
        ncol=4,
        fontsize=8,
        frameon=False,
    )
    ax.set_xlim(-1.85, 9.75)
    ax.set_ylim(-0.05, n + 0.05)
    ax.axis("off")
    ax.set_title(f"One session's item collection, as one Query returns it ({n} items)")
    return fig


# ------------------------------------------------------------------- notebook 02, threads


def thread_race(events: Sequence[tuple[float, int, str]], threads: int, commits: int) -> Picture:
    """Notebook 02: each thread's attempts, conflicts and commits over time."""
    fig = Picture(figsize=(9, 3.2), layout="constrained")
    ax = fig.subplots()
    styles = {
        "attempt": ("|", "0.6", 60),
        "conflict": ("x", "tab:red", 30),
        "commit": ("o", "tab:green", 18),
    }
    for kind, (marker, colour, size) in styles.items():
        points = [(when, worker) for when, worker, what in events if what == kind]
        ax.scatter(
            [p[0] for p in points],
            [p[1] for p in points],
            marker=marker,
            color=colour,
            s=size,
            label=kind,
            zorder=3 if kind == "commit" else 2,
        )
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("thread")
    ax.set_yticks(range(threads))
    ax.set_ylim(-0.6, threads - 0.4)  # half a row beyond the outer threads: no clipping
    ax.set_title(
        f"{threads} threads, {commits} optimistic commits on one item: every conflict is retried",
        fontsize=10,
    )
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=3, frameon=False)
    return fig


# ------------------------------------------------------------------- notebook 05

#: A move a cell tried: (the status the item had, the status asked for, whether it was written).
Move = tuple[Status, Status, bool]


def state_machine(
    transitions: Mapping[Status, frozenset[Status]], tried: Mapping[str, Sequence[Move]]
) -> Picture:
    """Notebook 05: the statuses and the moves ``transitions`` allows (grey, above), and per
    panel the moves a cell tried (below): solid if written, dashed if refused; green if the
    table allows the move, red if not."""
    statuses = list(Status)
    fig = Picture(figsize=(9, 2.9 * len(tried)), layout="constrained")
    axes = fig.subplots(len(tried), 1, squeeze=False)[:, 0]
    for ax, (title, moves) in zip(axes, tried.items(), strict=True):
        x = {s: 2.2 * i for i, s in enumerate(statuses)}
        for s in statuses:
            ax.text(
                x[s],
                0,
                s.value,
                ha="center",
                va="center",
                fontsize=10,
                bbox={"boxstyle": "round,pad=0.5", "fc": "#eef3fb", "ec": "0.3"},
            )
        for source, targets in transitions.items():
            for target in targets:
                far = abs(statuses.index(target) - statuses.index(source)) > 1
                ax.add_patch(
                    FancyArrowPatch(
                        (x[source] + 0.55, 0.18),
                        (x[target] - 0.55, 0.18),
                        connectionstyle=f"arc3,rad={-0.35 if far else -0.2}",
                        arrowstyle="-|>",
                        mutation_scale=12,
                        color="0.55",
                        lw=1.4,
                    )
                )
        seen: dict[tuple[Status, Status], int] = {}
        for source, target, written in moves:
            allowed = target in transitions[source]
            n = seen[(source, target)] = seen.get((source, target), 0) + 1
            colour = "tab:green" if allowed else "tab:red"
            if source is target:  # asked for the status it has: a loop under the box
                start, end, rad = (x[source] - 0.3, -0.25), (x[source] + 0.3, -0.25), 1.6 + n
                depth = 0.55 + 0.3 * n
            else:  # an arc under the boxes, whichever way it goes
                start, end, rad = (x[source], -0.25), (x[target], -0.25), 0.25 + 0.12 * n
                depth = rad * abs(end[0] - start[0]) / 2
                rad = rad if end[0] > start[0] else -rad
            ax.add_patch(
                FancyArrowPatch(
                    start,
                    end,
                    connectionstyle=f"arc3,rad={rad}",
                    arrowstyle="-|>",
                    mutation_scale=12,
                    color=colour,
                    lw=1.8,
                    ls="-" if written else "--",
                )
            )
            mid = ((start[0] + end[0]) / 2, -0.25 - depth)
            ax.text(
                *mid,
                "written" if written else "refused",
                ha="center",
                va="center",
                fontsize=7.5,
                color=colour,
                bbox={"fc": "white", "ec": "none", "pad": 0.5},
            )
        ax.set_xlim(-1.0, x[statuses[-1]] + 1.0)
        ax.set_ylim(-1.9, 1.0)
        ax.axis("off")
        ax.set_title(title, fontsize=10, loc="left")
    fig.legend(
        handles=[
            Patch(color="0.55", label="allowed by TRANSITIONS"),
            Patch(color="tab:green", label="tried, allowed"),
            Patch(color="tab:red", label="tried, not allowed"),
            Line2D([], [], color="0.3", label="written"),
            Line2D([], [], color="0.3", ls="--", label="refused"),
        ],
        loc="outside lower center",
        ncol=5,
        frameon=False,
        fontsize=8,
    )
    return fig
