"""Writers that do not conflict never refuse each other.

Seen under load: 72 fresh instances appending to one session (one clock) had 2 of 144 appends
refused once (ConditionalCheckFailed) before they landed. The clause was the idle deadline's
``NOT (idleFrom > :now)``: an append read the clock at T.999 s, another at T+1.000 s, and the
second landed first -- so the first found ``idleFrom`` a second past its ``:now``, as if its
clock lagged. Same clock, no conflicting write: the store allows a second of disagreement.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sessionstore as ss
from sessionstore.retry import RetryPolicy
from sessionstore.testing import RequestLog

NO_SLEEP = RetryPolicy(sleep=lambda _s: None)


def _overtaken(clock: ss.ManualClock, rival: Callable[[], object]) -> Any:
    """A hook: on the first UpdateItem sent, the clock crosses a second and ``rival`` writes
    (landing first, with a ``:now`` one second later)."""
    fired = False

    def hook(**_: Any) -> None:
        nonlocal fired
        if not fired:
            fired = True
            clock.advance(ms=1)
            rival()

    return hook


def test_an_append_overtaken_across_a_second_by_another_is_not_refused(
    client: Any, table: str
) -> None:
    clock = ss.ManualClock("2026-01-01T12:00:00.999Z")
    owner = ss.SessionStore(client, table, clock=clock, retry=NO_SLEEP)
    sid = owner.create_session(idle_seconds=600).session_id
    owner.activate(sid)
    mine, rival = (ss.SessionStore(client, table, clock=clock, retry=NO_SLEEP) for _ in range(2))
    hook = _overtaken(clock, lambda: rival.append_context(sid, ["rival"]))
    client.meta.events.register("before-send.dynamodb.UpdateItem", hook)
    try:
        with RequestLog(client) as log:
            mine.append_context(sid, ["mine"])
    finally:
        client.meta.events.unregister("before-send.dynamodb.UpdateItem", hook)
    # Each append: its reservation and its page, nothing refused, nothing sent twice.
    assert log.counts() == {"UpdateItem": 2, "PutItem": 2}
    session = owner.get_session(sid)
    assert sorted(owner.context(sid)) == ["mine", "rival"]
    # The deadline stays within the allowed second of the latest write's.
    assert session.idle_until >= clock.now_ms() // 1000 + 600 - 1


def test_a_tool_call_and_a_touch_overtaken_across_a_second_are_not_refused(
    client: Any, table: str
) -> None:
    clock = ss.ManualClock("2026-01-01T12:00:00.999Z")
    owner = ss.SessionStore(client, table, clock=clock, retry=NO_SLEEP)
    sid = owner.create_session(idle_seconds=600).session_id
    owner.activate(sid)
    owner.get_session(sid)
    for operation, write in (
        ("TransactWriteItems", lambda: owner.record_tool_call(sid, "c1", "t", {}, None, 1)),
        ("UpdateItem", lambda: owner.touch(sid)),
    ):
        clock.advance(ms=(999 - clock.now_ms() % 1000) % 1000 + 1000)  # the next second's .999
        rival = ss.SessionStore(client, table, clock=clock, retry=NO_SLEEP)
        hook = _overtaken(clock, lambda r=rival: r.append_context(sid, ["rival"]))
        client.meta.events.register(f"before-send.dynamodb.{operation}", hook)
        try:
            with RequestLog(client) as log:
                write()
        finally:
            client.meta.events.unregister(f"before-send.dynamodb.{operation}", hook)
        assert log.counts()[operation] == (1 if operation == "TransactWriteItems" else 2), operation
