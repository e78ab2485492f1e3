"""The core notebooks' pictures, drawn from what a cell really sent.

Layer: beside the exercises, for the tutorial only; nothing of the store depends on it. Why a
module: a notebook's path shows one call per picture (its source hidden in the book), the
drawing code is tested like code, and a learner who changes a parameter and runs the cell again
gets the picture of *that* run. Each function returns a ``figure.Picture``, a matplotlib
figure made without pyplot, so a cell that ends with the call shows it once.

The pictures of notebooks 02 and 04 are sequence diagrams (``sequences``) drawn from a
``timeline.Timeline``: the requests a cell sent, each attempt with its parameters and what came
back. Nothing here is random: the same run draws the same picture.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from .. import schema
from ..models import Status
from .figure import Picture, bare
from .sequences import lost_response, lost_update
from .timeline import Timeline

__all__ = [
    "Picture",
    "Timeline",
    "append_cost",
    "appends_race",
    "item_collection",
    "lost_response",
    "lost_update",
    "state_machine",
    "thread_race",
]


def _canvas(width: float, height: float) -> tuple[Picture, Axes]:
    fig = Picture(figsize=(width, height), layout="constrained")
    return fig, fig.subplots()


# ------------------------------------------------------------------- notebook 01

#: Each kind of item: its colour, and how often it is written.
_KINDS = {
    "metadata": ("#f4b183", "every write"),
    "attributes": ("#ffd966", "every change of them"),
    "context page": ("#a9d18e", "written once"),
    "tool call": ("#9dc3e6", "written once"),
}


def item_collection(
    items: Sequence[Mapping[str, Any]],
    kind: Callable[[str], str],
    holds: Callable[[Mapping[str, Any]], str],
) -> Picture:
    """Notebook 01: one session's items as one Query returned them, coloured by how often each
    is written, with the key ranges of the store's two reads."""
    n = len(items)
    fig, ax = _canvas(10, 4.2)
    for y, item in enumerate(items):
        top = n - 1 - y  # the first key at the top
        colour = _KINDS[kind(item["sk"])][0]
        ax.add_patch(Rectangle((0, top + 0.08), 7.0, 0.84, facecolor=colour, edgecolor="0.3"))
        ax.text(0.12, top + 0.5, item["sk"], family="monospace", fontsize=9, va="center")
        ax.text(2.25, top + 0.5, holds(item), fontsize=8.5, va="center")
        ttl = f"ttl {item['ttl']}"
        ax.text(6.9, top + 0.5, ttl, fontsize=7.5, va="center", ha="right", color="0.3")
    ax.add_patch(Rectangle((-1.75, 0.08), 1.6, n - 0.16, facecolor="0.93", edgecolor="0.3"))
    pk = f"pk =\n{items[0]['pk']}\n\none partition,\nsorted by sk"
    ax.text(-0.95, n / 2, pk, ha="center", va="center", fontsize=8.5, family="monospace")
    for label, high, x in [
        ("load()", schema.TOOLS_END, 7.35),
        ("context()", schema.PAGES_END, 8.55),
    ]:
        inside = [y for y, item in enumerate(items) if schema.META_SK <= item["sk"] <= high]
        ax.plot([x, x], [n - 1 - inside[-1] + 0.12, n - inside[0] - 0.12], lw=4, color="0.35")
        reads = f"{label}:\nmetadata\n… {high}"
        ax.text(x + 0.12, n - inside[0] - 0.3, reads, fontsize=8, va="top")
    legend = [
        Patch(facecolor=c, edgecolor="0.3", label=f"{k}: {w}") for k, (c, w) in _KINDS.items()
    ]
    ax.legend(
        handles=legend,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.02),
        ncol=4,
        fontsize=8,
        frameon=False,
    )
    title = f"One session's item collection, as one Query returns it ({n} items)"
    bare(ax, (-1.85, 9.75), (-0.05, n + 0.05), title)
    return fig


# ------------------------------------------------------------------- notebook 02, threads

#: How each kind of event is marked: marker, colour, size.
_EVENTS = {
    "attempt": ("|", "0.6", 60),
    "conflict": ("x", "tab:red", 30),
    "commit": ("o", "tab:green", 18),
}


def thread_race(events: Sequence[tuple[float, int, str]], threads: int, commits: int) -> Picture:
    """Notebook 02: each thread's attempts, conflicts and commits over time."""
    fig, ax = _canvas(9, 3.2)
    for kind, (marker, colour, size) in _EVENTS.items():
        points = [(when, worker) for when, worker, what in events if what == kind]
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        top = 3 if kind == "commit" else 2
        ax.scatter(xs, ys, marker=marker, color=colour, s=size, label=kind, zorder=top)
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


# ------------------------------------------------------------------- notebook 03


def appends_race(sent: Sequence[str], kept: Mapping[str, Sequence[str]], writers: int) -> Picture:
    """Notebook 03: one row per way of appending (``kept``: what each kept of ``sent``), one
    square per message sent, grouped by writer: filled if kept, empty if lost."""
    order = [m.strip('"') for m in sent]
    per_writer = max(1, len(order) // writers)
    fig, ax = _canvas(9.5, 0.75 * len(kept) + 1.4)
    colours = [f"C{n % 10}" for n in range(writers)]
    for row, (label, survived) in enumerate(kept.items()):
        y = len(kept) - 1 - row
        have = {m.strip('"') for m in survived}
        for i, message in enumerate(order):
            x = i + (i // per_writer) * 0.6  # a gap between writers
            edge = colours[i // per_writer]
            fill = edge if message in have else "white"
            ax.add_patch(
                Rectangle((x, y + 0.15), 0.85, 0.7, edgecolor=edge, facecolor=fill, lw=1.2)
            )
        count = f"{label}\n{len(have & set(order))} of {len(order)} kept"
        ax.text(-0.6, y + 0.5, count, ha="right", va="center", fontsize=9)
    for n in range(writers):
        x = n * (per_writer + 0.6) + per_writer / 2
        ax.text(x, -0.2, f"writer {n}", ha="center", va="top", fontsize=8, color=colours[n])
    title = f"{len(order)} concurrent appends ({writers} writers): filled = kept, empty = lost"
    x_range, y_range = (-0.2, len(order) + writers * 0.6), (-0.6, len(kept) + 0.1)
    bare(ax, x_range, y_range, title, fontsize=10, loc="left")
    return fig


def append_cost(inline_wcu: Sequence[int], paged_wcu: Mapping[int, int]) -> Picture:
    """Notebook 03: the write units of one append, by the message it appends: the inline list
    (``inline_wcu[k - 1]`` for message ``k``, until the next would pass 400 KB) and pages
    (measured at the messages of ``paged_wcu``)."""
    fig, ax = _canvas(8, 3.6)
    refused = len(inline_wcu) + 1
    inline = "inline list (source design), 1 message per append"
    ax.plot(range(1, refused), inline_wcu, color="tab:red", lw=2, label=inline)
    ax.plot(refused, inline_wcu[-1], marker="X", color="tab:red", markersize=10, ls="none")
    ax.annotate(
        f"message {refused}: refused\n(item over 400 KB)",
        (refused, inline_wcu[-1]),
        xytext=(-12, -8),
        textcoords="offset points",
        ha="right",
        va="top",
        fontsize=8,
        color="tab:red",
    )
    messages = sorted(paged_wcu)
    paged = [paged_wcu[m] for m in messages]
    ax.plot(
        messages, paged, color="tab:green", lw=2, marker="o", label="pages (the store), measured"
    )
    ax.set_xscale("log")
    ax.set_xlabel("the message appended (log scale)")
    ax.set_ylabel("write units of that append")
    ax.set_title("What one 500-byte append costs as the context grows", fontsize=10)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    return fig


# ------------------------------------------------------------------- notebook 05

#: A move a cell tried: (the status the item had, the status asked for, whether it was written).
Move = tuple[Status, Status, bool]
_BOX = {"boxstyle": "round,pad=0.5", "fc": "#eef3fb", "ec": "0.3"}


def _arrow(start: tuple[float, float], end: tuple[float, float], rad: float, **kw: Any) -> Any:
    style = f"arc3,rad={rad}"
    return FancyArrowPatch(
        start, end, connectionstyle=style, arrowstyle="-|>", mutation_scale=12, **kw
    )


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
            ax.text(x[s], 0, s.value, ha="center", va="center", fontsize=10, bbox=_BOX)
        for source, targets in transitions.items():
            for target in sorted(targets, key=statuses.index):  # the same order in every process
                far = abs(statuses.index(target) - statuses.index(source)) > 1
                ends = (x[source] + 0.55, 0.18), (x[target] - 0.55, 0.18)
                ax.add_patch(_arrow(*ends, -0.35 if far else -0.2, color="0.55", lw=1.4))
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
            ax.add_patch(_arrow(start, end, rad, color=colour, lw=1.8, ls="-" if written else "--"))
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
        bare(ax, (-1.0, x[statuses[-1]] + 1.0), (-1.9, 1.0), title, fontsize=10, loc="left")
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
