"""Sequence diagrams of the requests a cell sent (notebooks 02 and 04), from a ``Timeline``.

Layer: beside the exercises, for the tutorial only; ``pictures`` offers them with the others.
One lane per sender above one lane for the item, one column per attempt on the wire: an arrow
down is the request, the arrow up its answer (green written, orange refused, a red cross an
answer that never came), and under each attempt what the item holds after it, as far as the
requests and their answers show it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from matplotlib.axes import Axes

from ..conditions import readable
from .figure import Picture, bare
from .timeline import Attempt, Outcome, Timeline

_COLOURS = {
    Outcome.OK: "tab:green",
    Outcome.REFUSED: "tab:orange",
    Outcome.LOST: "tab:red",
    Outcome.ERROR: "tab:red",
    Outcome.PENDING: "0.5",
}

#: How a note on the item's lane reads: bad news in bold red.
_NEWS: dict[str, Any] = {"color": "0.15"}
_BAD_NEWS: dict[str, Any] = {"color": "tab:red", "weight": "bold"}

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
        _arrow(ax, (x - 0.12, y - 0.12), (x - 0.12, 0.12), "0.35", 1.2)  # the request, down
        if attempt.outcome is Outcome.LOST:  # the answer never arrives
            ax.plot([x + 0.12, x + 0.12], [0.12, y / 2], color=colour, lw=1.5, ls="--")
            ax.plot(x + 0.12, y / 2, marker="X", color=colour, markersize=10)
        else:
            _arrow(ax, (x + 0.12, 0.12), (x + 0.12, y - 0.12), colour, 1.5)
        box = {"boxstyle": "round,pad=0.25", "fc": "white", "ec": colour}
        ax.text(x, y + 0.14, label, ha="center", va="bottom", fontsize=7.5, color="0.1", bbox=box)
        if note:
            style = _BAD_NEWS if bad else _NEWS
            ax.text(x, -0.16, note, ha="center", va="top", fontsize=7.5, **style)
    bare(ax, (-1.6, len(ordered) - 0.4), (-1.0, top + 1.0), title, fontsize=10, loc="left")


def _arrow(
    ax: Axes, start: tuple[float, float], end: tuple[float, float], colour: str, lw: float
) -> None:
    """An arrow from ``start`` to ``end``."""
    ax.annotate("", end, start, arrowprops={"arrowstyle": "-|>", "color": colour, "lw": lw})


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
    title = "Read, modify, write back with no condition: both writes land"
    _sequence(top, unguarded.attempts, _describe_02, title)
    title = "With `version = <the version read>`: Bob is refused, retries on ALL_OLD"
    _sequence(bottom, guarded.attempts, _describe_02, title)
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
    if retry and attempt.outcome is Outcome.OK:
        # Sent with the call's ClientRequestToken: answered as the first attempt's success.
        return f"{name}\n-> ok (same token)", "the first's success;\nnothing applied", False
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
    title = f"{len(timeline.attempts)} attempts, one tool call, one item"
    _sequence(fig.subplots(), timeline.attempts, _describe_04, title)
    return fig
