"""The benchmark's contended status change (``benchmarks/contenders.py``): every side retries
with the same semantics -- one ``RetryPolicy``, whose backoff runs between a refused write and
that writer's next write to the session, whichever side's code makes it."""

from __future__ import annotations

import random
from typing import Any

import sessionstore as ss
from benchmarks.contenders import SessionStoreContender, SourceContender, Step, status_retry
from sessionstore import schema
from sessionstore.local import LocalDynamoDB
from sessionstore.retry import RetryPolicy


def _recording() -> tuple[RetryPolicy, list[float]]:
    slept: list[float] = []
    return RetryPolicy(sleep=slept.append, rng=random.Random(0)), slept


def test_the_status_work_retries_with_the_stores_default_policy() -> None:
    default, shared = RetryPolicy(), status_retry()
    assert (shared.max_attempts, shared.base_delay, shared.max_delay) == (
        default.max_attempts,
        default.base_delay,
        default.max_delay,
    )


def test_a_store_writer_refused_by_another_writers_move_backs_off_before_its_next(
    engine: LocalDynamoDB, table: str
) -> None:
    ours = SessionStoreContender(engine.endpoint_url, f"{table}-status")
    a_policy, a_slept = _recording()
    b_policy, b_slept = _recording()
    a, b = ours.status_writer(0, a_policy), ours.status_writer(1, b_policy)
    sid = ours.new_walk_session()

    assert a(sid) == Step(True, False, 0)  # initializing -> active; A's copy: active
    assert b(sid) == Step(False, False, 0)  # B's read shows its move made: no write, no refusal
    assert b(sid) == Step(True, False, 0)  # active -> closing
    assert b_slept == []
    # A asks for closing on its stale copy: refused, ALL_OLD shows the move made by B. The
    # call ends with nothing written; A backs off before asking for the next move.
    assert a(sid) == Step(False, False, 0)
    assert len(a_slept) == 1 and 0 <= a_slept[0] <= a_policy.base_delay
    assert a(sid) == Step(True, True, 0)  # closing -> closed, on the version ALL_OLD showed
    assert len(a_slept) == 1
    assert ours.status(sid) == "closed"


def test_a_source_writer_refused_backs_off_with_the_same_policy(
    engine: LocalDynamoDB, table: str
) -> None:
    source = SourceContender(engine.endpoint_url, f"{table}-source")
    policy, slept = _recording()
    advance = source.status_writer(0, policy)
    sid = source.new_walk_session()
    raced = [False]

    def another_writer_first(**_: Any) -> None:
        # Between the loop's read and its write, another writer makes the move.
        if not raced[0]:
            raced[0] = True
            _move(engine.endpoint_url, source.table, schema.meta_key(sid))

    source.client.meta.events.register("before-call.dynamodb.UpdateItem", another_writer_first)
    step = advance(sid)
    # refused once, backed off once, re-read (active), and wrote the next move
    assert step == Step(True, False, 0)
    assert len(slept) == 1 and 0 <= slept[0] <= policy.base_delay
    assert source.status(sid) == "closing"


def _move(endpoint: str, table: str, key: dict[str, Any]) -> None:
    """initializing -> active, as another writer's source loop would write it (its own client)."""
    ss.connect(endpoint).update_item(
        TableName=table,
        Key=key,
        UpdateExpression="SET #s = :s, #v = #v + :one",
        ExpressionAttributeNames={"#s": "status", "#v": "version"},
        ExpressionAttributeValues={":s": {"S": "active"}, ":one": {"N": "1"}},
    )
