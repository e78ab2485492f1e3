"""The tutorial's pictures are drawn from what really happened: ``Timeline`` records each attempt
on the wire with its outcome (written, refused with its ALL_OLD, lost), on the embedded engine;
the state machine is drawn from ``TRANSITIONS``; every picture shows itself as a PNG, the same
bytes for the same run."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from matplotlib.patches import FancyArrowPatch

import sessionstore as ss
from sessionstore import schema
from sessionstore.conditions import assign, update_item
from sessionstore.lifecycle import TRANSITIONS
from sessionstore.locking import version_is, version_up
from sessionstore.testing.faults import Fault, FaultInjector
from sessionstore.tutorial import pictures
from sessionstore.tutorial.timeline import Outcome

PNG = b"\x89PNG\r\n\x1a\n"
S = ss.Status


def _write(table: str, key: dict[str, Any], message: str, version: int) -> dict[str, Any]:
    update = assign("context", [message]) + version_up()
    return update_item(table, key, update, version_is(version), returns=None)


def test_a_timeline_records_who_sent_what_and_what_came_back(
    store: ss.SessionStore, table: str, engine: Any
) -> None:
    alice, bob = ss.connect(engine.endpoint_url), ss.connect(engine.endpoint_url)
    key = schema.meta_key(store.activate(store.create_session().session_id).session_id)
    with pictures.Timeline(Alice=alice, Bob=bob) as log:
        alice.get_item(TableName=table, Key=key, ConsistentRead=True)
        alice.update_item(**_write(table, key, "Alice: hi", 2))
        with pytest.raises(bob.exceptions.ConditionalCheckFailedException):
            bob.update_item(**_write(table, key, "Bob: hi", 2))
    bob.get_item(TableName=table, Key=key)  # after the block: not recorded

    assert [(a.actor, a.operation, a.outcome) for a in log.attempts] == [
        ("Alice", "GetItem", Outcome.OK),
        ("Alice", "UpdateItem", Outcome.OK),
        ("Bob", "UpdateItem", Outcome.REFUSED),
    ]
    refused = log.attempts[-1]
    assert refused.code == "ConditionalCheckFailedException"
    assert (refused.old_item() or {})["version"] == {"N": "3"}  # the refusal's ALL_OLD
    assert log.logs["Alice"].count == 2 and log.logs["Bob"].count == 1  # RequestLogs too


def test_a_lost_response_and_botocores_retry_are_two_attempts(
    client: Any, store: ss.SessionStore
) -> None:
    session = store.activate(store.create_session().session_id)
    lost = FaultInjector(client, script=[Fault.LOST_RESPONSE], operations={"TransactWriteItems"})
    with pictures.Timeline(client=client) as log:
        with log.by("1st delivery"), lost:
            first = store.record_tool_call(session.session_id, "call-1", "echo", {}, {}, 5)
        with log.by("the client, again"):
            again = store.record_tool_call(session.session_id, "call-1", "echo", {}, {}, 5)
    assert [(a.actor, a.outcome) for a in log.attempts] == [
        ("1st delivery", Outcome.LOST),
        # botocore's retry carries the call's ClientRequestToken: DynamoDB (and the engine)
        # answer it with the first attempt's success, applied once
        ("1st delivery", Outcome.OK),
        ("the client, again", Outcome.REFUSED),  # a new request: it finds the call's item...
    ]
    tokens = {a.params.get("ClientRequestToken") for a in log.attempts[:2]}
    assert len(tokens) == 1 and None not in tokens
    record = log.attempts[2].old_item() or {}
    assert record["toolCallId"] == {"S": "call-1"}  # ...in the cancellation's ALL_OLD
    assert first == again
    assert [r.tool_call_id for r in store.tool_calls(session.session_id)] == ["call-1"]
    picture = pictures.lost_response(log)
    said = " ".join(" ".join(text.get_text().split()) for text in picture.axes[0].texts)
    assert "botocore's retry -> ok (same token)" in said
    assert "the first's success; nothing applied" in said
    png = picture._repr_png_()
    assert png.startswith(PNG) and png == picture._repr_png_()  # deterministic


def test_the_state_machine_is_drawn_from_the_table_and_the_moves_tried() -> None:
    moves = {
        "source": [(S.CLOSING, S.CLOSED, True), (S.CLOSED, S.ACTIVE, True)],
        "guarded": [(S.CLOSING, S.CLOSED, True), (S.CLOSED, S.ACTIVE, False)],
    }
    picture = pictures.state_machine(TRANSITIONS, moves)
    allowed = sum(len(targets) for targets in TRANSITIONS.values())
    for ax, tried in zip(picture.axes, moves.values(), strict=True):
        arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
        assert len(arrows) == allowed + len(tried)
        dashed = [a for a in arrows if a.get_linestyle() == "--"]
        assert len(dashed) == sum(not written for _, _, written in tried)  # refused: dashed
    fewer = {**TRANSITIONS, S.INITIALIZING: frozenset({S.ACTIVE})}  # a table changed...
    redrawn = pictures.state_machine(fewer, {"none": []})  # ...is drawn as it is
    assert len(redrawn.axes[0].patches) == allowed - 1
    assert picture._repr_png_().startswith(PNG)


def test_the_item_collection_draws_every_item_in_key_order() -> None:
    sks = ["metadata", "msg#000000000000", "tool#call-1"]
    items = [{"pk": "session#s-1", "sk": sk, "ttl": 1} for sk in sks]
    kinds = {"metadata": "metadata", "msg#000000000000": "context page", "tool#call-1": "tool call"}
    picture = pictures.item_collection(items, kinds.__getitem__, lambda item: "holds")
    texts = [t.get_text() for t in picture.axes[0].texts]
    assert [t for t in texts if t in sks] == sks
    assert picture._repr_png_().startswith(PNG)


_DRAW_STATE_MACHINE = """
import hashlib
from sessionstore.lifecycle import TRANSITIONS
from sessionstore.models import Status as S
from sessionstore.tutorial import pictures
tried = {"tried": [(S.CLOSING, S.CLOSED, True), (S.CLOSED, S.ACTIVE, False)]}
print(hashlib.sha256(pictures.state_machine(TRANSITIONS, tried)._repr_png_()).hexdigest())
"""


def test_the_state_machine_is_the_same_bytes_in_every_process() -> None:
    """The table's targets are sets, iterated in an order that changes with the process's hash
    seed: the arrows are drawn in the statuses' order, so a notebook's picture does not."""
    digests = {
        subprocess.run(
            [sys.executable, "-c", _DRAW_STATE_MACHINE],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        for seed in ("1", "4")
    }
    assert len(digests) == 1
