"""``ClientRequestToken`` on TransactWriteItems, kept as DynamoDB keeps it.

A repeat of a successful transaction under its token within 10 minutes succeeds without being
applied again; another request under the same token is ``IdempotentParameterMismatchException``;
after the window the token is new again (the engine's clock is injected for that one).
"""

from __future__ import annotations

from typing import Any

import pytest

import sessionstore as ss
from sessionstore.engine import tokens as engine_tokens
from sessionstore.testing import Fault, FaultInjector, RequestLog


def _key(sk: str) -> dict[str, Any]:
    return {"pk": {"S": "tokens"}, "sk": {"S": sk}}


def _increment(table: str, sk: str, by: str = "1") -> dict[str, Any]:
    return {
        "Update": {
            "TableName": table,
            "Key": _key(sk),
            "UpdateExpression": "ADD n :by",
            "ExpressionAttributeValues": {":by": {"N": by}},
        }
    }


def _n(client: Any, table: str, sk: str) -> int:
    item = client.get_item(TableName=table, Key=_key(sk), ConsistentRead=True).get("Item")
    return int(item["n"]["N"]) if item else 0


def test_a_repeat_under_the_same_token_succeeds_without_being_applied_again(
    client: Any, table: str
) -> None:
    request = {"TransactItems": [_increment(table, "a")], "ClientRequestToken": "token-repeat"}
    client.transact_write_items(**request)
    client.transact_write_items(**request)  # a success: the first one's
    assert _n(client, table, "a") == 1
    client.transact_write_items(TransactItems=[_increment(table, "a")])  # a new token: applied
    assert _n(client, table, "a") == 2


def test_another_request_under_a_used_token_is_a_mismatch(client: Any, table: str) -> None:
    client.transact_write_items(
        TransactItems=[_increment(table, "b")], ClientRequestToken="token-mismatch"
    )
    with pytest.raises(client.exceptions.IdempotentParameterMismatchException):
        client.transact_write_items(
            TransactItems=[_increment(table, "b", by="5")], ClientRequestToken="token-mismatch"
        )
    assert _n(client, table, "b") == 1


def test_botocore_retry_after_a_lost_response_is_answered_not_applied(
    client: Any, table: str
) -> None:
    """The case the token exists for: the first attempt lands, its response is lost, botocore
    sends the same request (the same token) again, and gets the success."""
    with (
        RequestLog(client) as sent,
        FaultInjector(client, script=[Fault.LOST_RESPONSE], operations={"TransactWriteItems"}),
    ):
        client.transact_write_items(TransactItems=[_increment(table, "c")])
    assert sent.counts().get("TransactWriteItems") == 2
    assert _n(client, table, "c") == 1


def test_a_cancelled_transaction_repeated_under_its_token_runs_again(
    client: Any, table: str
) -> None:
    guarded = {
        "ConditionCheck": {
            "TableName": table,
            "Key": _key("gate"),
            "ConditionExpression": "attribute_exists(pk)",
        }
    }
    request = {
        "TransactItems": [_increment(table, "d"), guarded],
        "ClientRequestToken": "token-cancelled",
    }
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(**request)
    client.put_item(TableName=table, Item=_key("gate"))
    client.transact_write_items(**request)
    assert _n(client, table, "d") == 1


@pytest.mark.embedded_only("moves the embedded engine's clock")
def test_after_ten_minutes_the_token_is_new_again(
    client: Any, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1_000.0]
    monkeypatch.setattr(engine_tokens.LEDGER, "clock", lambda: now[0])
    request = {"TransactItems": [_increment(table, "e")], "ClientRequestToken": "token-window"}
    client.transact_write_items(**request)
    now[0] += engine_tokens.WINDOW_S - 1
    client.transact_write_items(**request)
    assert _n(client, table, "e") == 1
    now[0] += 2  # 10 minutes and a second after the first completed
    client.transact_write_items(**request)
    assert _n(client, table, "e") == 2


def test_the_store_sees_one_version_step_for_its_lost_transaction(
    store: ss.SessionStore, client: Any
) -> None:
    """An attribute change whose response is lost: botocore's retry is answered with the
    success, and the store reports the change once."""
    session = store.activate(store.create_session().session_id)
    with FaultInjector(client, script=[Fault.LOST_RESPONSE], operations={"TransactWriteItems"}):
        store.update_attributes(session.session_id, {"title": "trip"})
    after = store.get_session(session.session_id)
    assert after.version == session.version + 1
    assert dict(after.attributes) == {"title": "trip"}


def test_the_ledger_is_bounded_oldest_forgotten_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_tokens, "MAX_TOKENS", 3)
    ledger = engine_tokens.TokenLedger(clock=lambda: 0.0)
    request = {"TransactItems": []}
    for token in ("t1", "t2", "t3", "t4"):
        ledger.record(token, request, "answer")
    assert ledger.repeat_of("t1", request) == (False, None)
    assert ledger.repeat_of("t4", request) == (True, "answer")
    with pytest.raises(Exception, match="different payload"):
        ledger.repeat_of("t2", {"TransactItems": [{}]})
