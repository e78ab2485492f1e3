"""A claim's lease renewed while its tool waits (``sessionstore.round_trips``), against the embedded
engine: a renewal never takes another delivery's claim, reopens a recorded call, nor revives a
lease that ran out. Over HTTP: ``tests/mcp/test_back_channel.py``."""

from __future__ import annotations

import dataclasses

import sessionstore as ss
from sessionstore import claims, round_trips
from sessionstore.testing import RequestLog


def test_a_lease_is_renewed_only_while_the_claim_is_ours_and_running(
    store: ss.SessionStore, active: ss.Session, clock: ss.ManualClock, requests: RequestLog
) -> None:
    """``round_trips.renew``: one conditional UpdateItem; it never takes another delivery's claim,
    reopens a recorded call, nor revives a lease that ran out."""
    table, sid = store.table, active.session_id

    def claim(call_id: str) -> claims.Claim:
        outcome = claims.claim(
            table, sid, call_id, "t", {}, owner="alice", ttl=active.ttl, lease_ms=10_000
        )
        assert outcome.state is claims.State.CLAIMED
        return outcome.claim

    ours = claim("c-1")
    clock.advance(seconds=6)
    requests.reset()
    assert round_trips.renew(table, ours, 1, lease_ms=10_000) == clock.now_ms() + 10_000
    assert requests.operations == ["UpdateItem"]
    clock.advance(seconds=6)  # past the first lease, within the renewed one
    repeat = claims.claim(
        table, sid, "c-1", "t", {}, owner="alice", ttl=active.ttl, lease_ms=10_000
    )
    assert repeat.state is claims.State.IN_PROGRESS
    stolen = dataclasses.replace(ours, token="someone-else")
    assert round_trips.renew(table, stolen, 1, lease_ms=10_000) is None
    assert round_trips.renew(table, ours, 2, lease_ms=10_000) is None  # not at round 2
    claims.complete(table, sid, "c-1", ours, {}, {"ok": True}, 1)
    assert round_trips.renew(table, ours, 1, lease_ms=10_000) is None  # recorded
    lapsed = claim("c-2")
    clock.advance(seconds=10)
    assert round_trips.renew(table, lapsed, 1, lease_ms=10_000) is None
    told = claims.claim(table, sid, "c-2", "t", {}, owner="alice", ttl=active.ttl, lease_ms=10_000)
    assert told.state is claims.State.UNKNOWN  # and it stays so
