"""The legacy ``Mcp-Session-Id`` layer at its edges, over real HTTP on loopback.

The store failing while an id is adopted is a 503 (retry), never a 404 (start over), and the
same id is adopted once the store is back.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest

import sessionstore as ss
from sessionstore.local import LocalDynamoDB
from sessionstore.testing import Fault, FaultInjector
from tests.test_mcp_unmodified_clients import Instances, _post, _run


def _fail(store: ss.SessionStore, *operations: str) -> FaultInjector:
    """Every request of these operations answered with a 500, after every retry: Unavailable."""
    return FaultInjector(store.client, rates={Fault.SERVER_ERROR: 1.0}, operations=operations)


@pytest.mark.parametrize(
    "failing",
    [
        pytest.param(("PutItem", "TransactWriteItems"), id="creating"),
        pytest.param(("UpdateItem",), id="activating"),
    ],
)
def test_adopting_an_id_while_the_store_fails_is_503_then_the_id_is_adopted(
    engine: LocalDynamoDB, table: str, failing: tuple[str, ...]
) -> None:
    instances = Instances(engine, table, adopt=True)

    async def main() -> tuple[httpx2.Response, httpx2.Response, int]:
        async with instances.running() as a:
            with _fail(instances.stores[0], *failing) as faults:
                refused = await asyncio.to_thread(_post, a.url, "platform-minted-1")
            adopted = await asyncio.to_thread(_post, a.url, "platform-minted-1")
        return refused, adopted, sum(faults.injected.values())

    refused, adopted, injected = _run(main)
    assert injected > 0
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == -32603
    assert adopted.status_code == 200 and '"note"' in adopted.text
    session = instances.stores[0].get_session("platform-minted-1")
    assert session.status is ss.Status.ACTIVE


def test_an_id_adopted_elsewhere_first_while_the_store_fails_is_503(
    engine: LocalDynamoDB, table: str
) -> None:
    """Read: not there; create: another instance created it meanwhile; read again: the store
    fails. That is a 503 too, and the id is served once the store is back."""
    instances = Instances(engine, table, adopt=True)
    sid = "platform-minted-2"

    async def main() -> tuple[httpx2.Response, httpx2.Response, list[str]]:
        async with instances.running() as a:
            store = instances.stores[0]
            other = ss.SessionStore(ss.connect(engine.endpoint_url), table, clock=instances.clock)
            reads = _fail(store, "GetItem", "Query")
            seen: list[str] = []

            def rival_first(**kwargs: Any) -> None:
                seen.append(kwargs["event_name"])
                if len(seen) == 1:  # the other instance's adoption lands first
                    other.activate(other.create_session(sid).session_id)
                    reads.attach()  # and the store fails from here on

            event = "before-send.dynamodb.PutItem"
            store.client.meta.events.register(event, rival_first)
            try:
                refused = await asyncio.to_thread(_post, a.url, sid)
            finally:
                store.client.meta.events.unregister(event, rival_first)
                reads.detach()
            served = await asyncio.to_thread(_post, a.url, sid)
        return refused, served, seen

    refused, served, seen = _run(main)
    assert seen == ["before-send.dynamodb.PutItem"]  # one create, refused as taken
    assert refused.status_code == 503
    assert served.status_code == 200 and '"note"' in served.text
    assert instances.stores[0].get_session(sid).status is ss.Status.ACTIVE
