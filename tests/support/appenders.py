"""Concurrent appenders on one session, for the context-page tests: threads in this process and
whole processes (``python -m tests.support.appenders``) on the same embedded engine.

Each writer appends ``{"w": <writer>, "i": <n>}`` messages, one to three per append, and keeps
the ``i`` of every acknowledged message; ``check`` then reads the context back and proves that
nothing acknowledged was lost, nothing appears twice, and each writer's messages are in the
order it appended them. Bounded: a fixed number of appends per writer, a deadline for all.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable

from sessionstore.client import connect
from sessionstore.codec import JSON
from sessionstore.errors import Unavailable
from sessionstore.store import SessionStore


def append_all(
    store: SessionStore, session_id: str, writer: str, appends: int, deadline_s: float
) -> list[int]:
    """Append ``appends`` times (1-3 messages each); the ``i`` of every acknowledged message.
    An ``Unavailable`` append is not acknowledged (its messages may be missing, never doubled)."""
    acked: list[int] = []
    n = 0
    stop = time.monotonic() + deadline_s
    for k in range(appends):
        if time.monotonic() > stop:
            break
        batch = [n + j for j in range(1 + k % 3)]
        n += len(batch)
        try:
            store.append_context(session_id, [{"w": writer, "i": i} for i in batch])
        except Unavailable:
            continue
        acked.extend(batch)
    return acked


def check(messages: Iterable[JSON], acked: dict[str, list[int]]) -> dict[str, int]:
    """Raise AssertionError on a lost, doubled or reordered message; counts otherwise."""
    seen: dict[str, list[int]] = {}
    for m in messages:
        assert isinstance(m, dict), m
        seen.setdefault(str(m["w"]), []).append(int(str(m["i"])))
    for writer, got in seen.items():
        assert len(got) == len(set(got)), f"{writer}: a message twice: {got}"
        assert got == sorted(got), f"{writer}: out of order: {got}"
    for writer, want in acked.items():
        missing = set(want) - set(seen.get(writer, []))
        assert not missing, f"{writer}: acknowledged but lost: {sorted(missing)}"
    return {"writers": len(seen), "messages": sum(len(v) for v in seen.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--appends", type=int, default=20)
    parser.add_argument("--deadline", type=float, default=60.0)
    args = parser.parse_args(argv)
    if not args.endpoint.startswith(("http://127.0.0.1:", "http://localhost:")):
        parser.error("the embedded engine only: --endpoint must be on loopback")
    store = SessionStore(connect(args.endpoint), args.table)
    acked = append_all(store, args.session, args.writer, args.appends, args.deadline)
    json.dump({"writer": args.writer, "acked": acked}, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
